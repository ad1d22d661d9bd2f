"""The RDMA CM runner: CM sequences on a set-up pair, recorded as timelines.

- :mod:`hil.cm.session`: ``CMSession``, ``session.run(name, **params)``.
- :mod:`hil.cm.sequences`, :mod:`hil.cm.steps`: the sequences and the steps
  they are made of; the endpoints (:mod:`hil.cm.endpoint`) drive the agents'
  CM workers (the ctypes layer over librdmacm lives in the agent:
  ``hil/agent/remote/librdmacm.py``).

What a run records is judged by :mod:`hil.judge` (timeline, contract,
profiles), which knows nothing of how it was recorded.
"""
