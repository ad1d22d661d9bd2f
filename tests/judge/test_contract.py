"""The checker itself: rule registry, rule selection, verdict rendering."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from cmtimelines import connected, rejected

from hil.errors import InputError
from hil.judge.contract import RULES, check, register_rule, rule_named, rules_with
from hil.judge.expectations import kernel_log_clean
from hil.judge.profiles import IW_CXGB4, SIW
from hil.judge.rule import Finding, Rule, rule

HERE = Path(__file__).parent


def test_rules_have_unique_names_statements_and_sources() -> None:
    names = [r.name for r in RULES]
    assert len(names) == len(set(names)) == 40
    for r in RULES:
        assert r.statement and r.source.startswith("[") and "\n" not in r.statement


def test_every_rule_has_a_violating_test() -> None:
    tests = "".join(p.read_text() for p in HERE.glob("test_*.py"))
    missing = [r.name for r in RULES if f'"{r.name}"' not in tests]
    assert not missing, f"rules without a violating-timeline test: {missing}"


@pytest.fixture
def lab_rule() -> Iterator[None]:
    """A lab's own rule, registered for one test and taken out after it."""

    @rule("no-established", None, "nothing connects (a lab's own rule)", "[lab policy]")
    def no_established(tl, profile):  # type: ignore[no-untyped-def]
        yield from (
            Finding("a connection was established", (e,))
            for e in tl.events
            if e.type == "ESTABLISHED"
        )

    register_rule(no_established)
    yield
    RULES.unregister(no_established.name)


def test_a_registered_rule_runs_in_every_verdict(lab_rule: None) -> None:
    verdict = check(connected().build(), SIW)
    assert [v.rule for v in verdict.violations] == ["no-established"] * 2
    assert "no-established" in verdict.rules
    with pytest.raises(InputError, match="registered already"):
        register_rule(rule_named("no-established"))


def test_invariants_are_numbered_from_the_contract() -> None:
    assert {r.invariant for r in RULES} == {None, 1, 2, 3, 4, 5, 6, 7, 9, 10, 11}


def test_verdict_text_and_json_name_rule_profile_and_events() -> None:
    verdict = check(rejected("iw_cxgb4", status=-104), IW_CXGB4)
    assert not verdict.ok
    text = verdict.to_text()
    assert text.startswith("contract FAILED: scenario reject, profile iw_cxgb4, 40 rules, 1 viol")
    assert "[reject-status] (profile iw_cxgb4)" in text
    assert "event  a:1 REJECTED(-104)" in text and "action b:reject b:2 -> ok" in text
    data = json.loads(verdict.to_json())
    assert data["ok"] is False and data["profile"] == "iw_cxgb4"
    (v,) = data["violations"]
    assert v["rule"] == "reject-status" and v["events"][0]["type"] == "REJECTED"


def test_passing_verdict_renders() -> None:
    verdict = check(connected().build(), SIW)
    assert verdict.ok and verdict.to_text().startswith("contract PASSED")
    assert json.loads(verdict.to_json())["violations"] == []


def test_rules_select_by_name_or_object() -> None:
    rules: list[Rule | str] = ["fifo-per-channel", rule_named("reject-status")]
    verdict = check(connected().build(), SIW, rules=rules)
    assert verdict.rules == ("fifo-per-channel", "reject-status")


def test_unknown_rule_names_are_input_errors() -> None:
    with pytest.raises(InputError, match="no contract rule 'nope'"):
        check(connected().build(), SIW, rules=["nope"])
    with pytest.raises(InputError, match="no contract rule kernel-log-cleaner to replace"):
        rules_with(replace(kernel_log_clean(), name="kernel-log-cleaner"))
