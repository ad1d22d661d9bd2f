"""A test's result finds the contract verdict of each of its timelines (hil/run/observer.py)."""

from __future__ import annotations

from dataclasses import replace

from hil.judge.contract import check
from hil.judge.profiles import SIW
from hil.judge.timeline import Action, Timeline
from hil.run.observer import TestResult


def test_the_contract_verdict_of_a_judged_timeline_is_found_again() -> None:
    connect = Action(500, "a", "connect", "a:1", {"dst": "198.18.0.2", "port": 7174})
    tl = Timeline("rping", "siw", ("guest1", "guest2"), (connect,))
    verdict = check(tl, SIW)
    result = TestResult("t", "passed", ((tl, verdict),), None, None, None, (), ())
    # The wire stage's copy of the timeline is equal, not the same object.
    assert result.verdict_of(replace(tl)) is verdict
    assert result.verdict_of(replace(tl, scenario="other")) is None
