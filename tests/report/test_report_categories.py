"""categories.json: contract violations, lab errors, product failures and test defects apart."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import hil.agent  # noqa: F401 -- registers AgentCallError, a HilError subclass
from hil.report.categories import category_of, infrastructure_classes, write_categories


@pytest.mark.parametrize(
    ("status", "message", "category"),
    [
        (
            "failed",
            "AssertionError: contract FAILED: scenario close, profile siw, 16 rules, "
            "1 violations\n  [close-status] ...\nassert False",
            "Contract violations",
        ),
        (
            "failed",
            "Failed: contract FAILED: scenario reject\nscenario reject on a <-> b:",
            "Contract violations",
        ),
        ("failed", "AssertionError: contract violation: DISCONNECTED twice", "Contract violations"),
        (
            "failed",
            "Failed: wire FAILED: profile siw, 8 passed, 1 failed, 0 skipped, 1 not applicable\n"
            "  [orderly-close-is-fin] fail: 1 of 1 closes",
            "Wire rules broken",
        ),
        (
            "broken",
            "hil.errors.Unreachable: lab-a: no TCP connection within 10s",
            "Lab / infrastructure errors",
        ),
        (
            "broken",
            "hil.agent.client.AgentCallError: lab-b: cm_open failed",
            "Lab / infrastructure errors",
        ),
        (
            "failed",
            "Failed: hil: CommandTimeout: lab-a: setup did not finish",
            "Lab / infrastructure errors",
        ),
        ("failed", "Failed: Timeout >600.0s", "Lab / infrastructure errors"),
        (
            "failed",
            "AssertionError: resources not back to baseline on lab-a: qp 3 -> 4",
            "Product failures",
        ),
        ("broken", "KeyError: 'conn'", "Test defects"),
        (
            "failed",
            "known flaky: a race in close (https://x/1)\nAssertionError: contract FAILED: x",
            "Known flaky",
        ),
        ("broken", "known flaky: r (u)\nhil.errors.Unreachable: lab-a: down", "Known flaky"),
        ("broken", "known flaky: r (u)\nKeyError: 'conn'", "Known flaky"),
        ("broken", "ValueError: hil.errors.Unreachable: quoted, not raised", "Test defects"),
        ("passed", "", None),
    ],
)
def test_each_failure_lands_in_one_category(
    status: str, message: str, category: str | None
) -> None:
    assert category_of(status, message) == category


def test_every_hil_error_class_counts_as_infrastructure() -> None:
    names = infrastructure_classes()
    assert {
        "hil.errors.HilError",
        "hil.errors.SSHError",
        "hil.errors.LabError",
        "hil.agent.client.AgentCallError",
    } <= set(names)


def test_the_file_is_what_allure_reads(tmp_path: Path) -> None:
    cats = json.loads(write_categories(tmp_path).read_text())
    for cat in cats:
        assert set(cat) == {"name", "description", "matchedStatuses", "messageRegex"}
        assert cat["messageRegex"].startswith("(?s)")  # Java matches the whole message
