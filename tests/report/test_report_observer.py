"""The Allure observer keeps each judged timeline's contract verdict for the wire picture."""

from __future__ import annotations

from dataclasses import replace

import wireexchanges

from hil.judge.contract import check
from hil.judge.profiles import profile_for
from hil.report.observer import AllureObserver


def test_the_contract_verdict_of_a_judged_timeline_is_found_again() -> None:
    observer = AllureObserver()
    tl = wireexchanges.timeline()
    verdict = check(tl, profile_for("siw"))
    observer.verdict(tl, verdict)
    # The wire fixture's copy of the timeline is equal, not the same object.
    assert observer.verdict_of(replace(tl)) is verdict
    assert observer.verdict_of(replace(tl, scenario="other")) is None
