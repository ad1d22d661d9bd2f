"""The judge: timelines of CM runs and the iWARP CM contract that judges them.

It needs nothing of hil but :mod:`hil.errors`, so any harness can judge a
timeline it recorded itself (or read back from JSON):

- :mod:`hil.judge.timeline`: one sequence run as data (events, actions, clock
  offsets, after-run evidence), JSON round trip.
- :mod:`hil.judge.profiles`: ``SIW``, ``IW_CXGB4``, ``profile_for(driver)``.
- :mod:`hil.judge.contract`: ``check(timeline, profile) -> Verdict``, the rules
  (:mod:`hil.judge.invariants`, :mod:`hil.judge.expectations`,
  :mod:`hil.judge.rule`).
"""
