"""The RDMA CM runner: CM sequences on a set-up pair, recorded as timelines.

- :mod:`hil.cm.session`: ``CMSession``, ``session.run(name, **params)``.
- :mod:`hil.cm.registry`: the sequences by name, ``@sequence`` to add one.
- :mod:`hil.cm.sequences`, :mod:`hil.cm.steps`: the built-in sequences and
  the steps they are made of; the endpoints (:mod:`hil.cm.endpoint`) drive
  the agents' CM workers (the ctypes layer over librdmacm lives in the
  agent: ``hil/agent/remote/librdmacm/``).

Its imports form no cycle (``tests/test_layers.py``): see
:mod:`hil.cm.interfaces` for the order.

What a run records is judged by :mod:`hil.judge` (timeline, contract,
profiles), which knows nothing of how it was recorded.
"""
