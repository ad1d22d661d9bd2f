"""The RDMA CM engine: timelines, the iWARP CM contract and its provider profiles.

- :mod:`hil.cm.timeline`: one sequence run as data (events, actions, clock
  offsets, after-run evidence), JSON round trip.
- :mod:`hil.cm.profiles`: ``SIW``, ``IW_CXGB4``, ``profile_for(driver)``.
- :mod:`hil.cm.contract`: ``check(timeline, profile) -> Verdict``, the rules
  (:mod:`hil.cm.invariants`, :mod:`hil.cm.expectations`, :mod:`hil.cm.rule`).
- :mod:`hil.cm.session`, :mod:`hil.cm.sequences`: run CM sequences on a
  set-up pair through the agents' CM endpoints (the ctypes layer over
  librdmacm lives in the agent: ``hil/agent/remote/librdmacm.py``).
"""
