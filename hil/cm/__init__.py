"""The RDMA CM engine: timelines, the iWARP CM contract and its provider profiles.

- :mod:`hil.cm.timeline`: one sequence run as data (events, actions, clock
  offsets, after-run evidence), JSON round trip.
- :mod:`hil.cm.profiles`: ``SIW``, ``IW_CXGB4``, ``profile_for(driver)``.
- :mod:`hil.cm.contract`: ``check(timeline, profile) -> Verdict``, the rules
  (:mod:`hil.cm.invariants`, :mod:`hil.cm.expectations`, :mod:`hil.cm.rule`).
- :mod:`hil.cm.librdmacm`: the ctypes layer over librdmacm that runs inside
  the remote agent (stdlib only; it imports nothing from hil).

This package's ``__init__`` imports nothing, so the agent can import
``hil.cm.librdmacm`` without pulling in the controller's modules.
"""
