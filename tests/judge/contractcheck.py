"""Assertions for the contract tests: a timeline breaks exactly the named rule, or none."""

from __future__ import annotations

from hil.judge.contract import Verdict, Violation, check
from hil.judge.profiles import Profiles
from hil.judge.timeline import Timeline


def breaks(tl: Timeline, profile: Profiles, rule: str, says: str = "") -> Verdict:
    """Assert ``rule`` fails on ``tl`` under ``profile``, naming itself and the profile."""
    verdict = check(tl, profile, rules=[rule])
    assert not verdict.ok, f"{rule} passed a violating timeline:\n{tl.to_json(indent=1)}"
    for v in verdict.violations:
        assert v.rule == rule and v.profile == profile.name
        assert f"[{rule}]" in v.to_text() and f"profile {profile.name}" in v.to_text()
        assert v.events or v.actions or rule in ("resources-back-to-baseline", "kernel-log-clean")
    assert says in verdict.to_text(), verdict.to_text()
    return verdict


def conforms(tl: Timeline, profile: Profiles) -> None:
    """Assert the whole contract passes on ``tl`` under ``profile``."""
    verdict = check(tl, profile)
    assert verdict.ok, verdict.to_text()


def violations(tl: Timeline, profile: Profiles, rule: str) -> tuple[Violation, ...]:
    """The violations of ``rule`` alone on ``tl`` under ``profile``."""
    return check(tl, profile, rules=[rule]).violations
