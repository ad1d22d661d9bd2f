"""Each test's outcome per night, and the flip ranking, on crafted histories."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from hil.errors import InputError
from hil.report import flaky, results
from hil.report.categories import INFRASTRUCTURE, KNOWN_FLAKY
from hil.report.results import Result

CATEGORY = {"F": "Product failures", "B": "Test defects", "L": INFRASTRUCTURE}
STATUS = {"P": "passed", "F": "failed", "B": "broken", "L": "broken", "S": "skipped"}


def nights(**tests: str) -> list[flaky.Outcome]:
    """A history from one string per test (a letter per night, ``.`` not run)."""
    length = max(map(len, tests.values()))
    out = []
    for run in range(1, length + 1):
        for test, letters in sorted(tests.items()):
            c = letters.ljust(length, ".")[run - 1]
            if c != ".":
                out.append(
                    flaky.Outcome(
                        run, f"2026-11-{run:02d}T02:00:00Z", test, STATUS[c],
                        CATEGORY.get(c), "p1", "siw", known_flaky=False,
                    )
                )  # fmt: skip
    return out


@pytest.mark.parametrize(
    ("letters", "count"),
    [
        ("PPPPPPP", 0),
        ("FFFF", 0),
        ("PPFPFFP", 4),
        ("PFPF", 3),
        ("PLPLP", 0),  # a lab that was down says nothing of the test
        ("PSFS.P", 2),  # skips and nights not run are left out
        ("PBP", 2),  # a broken test is not a pass
        ("FLF", 0),
    ],
)
def test_flips_count_pass_next_to_failure(letters: str, count: int) -> None:
    assert flaky.flips(letters) == count


def test_ranked_by_flips_then_failures_then_id() -> None:
    history = nights(
        steady="PPPPPP",
        always_red="FFFFFF",
        two_flips_b="PPFPPP",
        two_flips_a="PPPFPP",
        more_fails="PFFPPP",
        most="PFPFPF",
        lab="PLPLPL",
    )
    ranked = flaky.rank(history, 14)
    assert [(f.test, f.flips, f.failures, f.outcomes) for f in ranked] == [
        ("most", 5, 3, "PFPFPF"),
        ("more_fails", 2, 2, "PFFPPP"),
        ("two_flips_a", 2, 1, "PPPFPP"),
        ("two_flips_b", 2, 1, "PPFPPP"),
    ]
    assert ranked[0].line() == "5 flips  PFPFPF  most  (p1, siw)"


def test_only_the_last_n_nights_count_and_absent_nights_show() -> None:
    history = nights(old_flip="PFPPPP", new="..PFP")
    ranked = flaky.rank(history, 4)
    assert [(f.test, f.outcomes) for f in ranked] == [("new", "PFP.")]
    assert [run for run, _ in flaky.window(history, 4)] == [3, 4, 5, 6]


def test_pairs_and_known_flaky_of_the_last_run_are_shown() -> None:
    history = [
        flaky.Outcome(1, "n1", "t", "passed", None, "p1", "siw", False),
        flaky.Outcome(2, "n2", "t", "failed", KNOWN_FLAKY, "p2", "iw_cxgb4", True),
    ]
    (only,) = flaky.rank(history, 14)
    assert only.where == "p1, siw; p2, iw_cxgb4"
    assert only.known_flaky and only.line().endswith("[known flaky]")


def test_run_numbers_that_restart_are_other_nights() -> None:
    # runs 1, 2, then 1 again (the runs directory was wiped, outcomes.jsonl kept)
    again = flaky.Outcome(1, "2026-12-09T02:00:00Z", "t", "passed", None, "p1", "siw", False)
    history = [*nights(t="PF"), again]
    assert [run for run, _ in flaky.window(history, 14)] == [1, 2, 1]
    assert [f.outcomes for f in flaky.rank(history, 14)] == ["PFP"]
    assert [run for run, _ in flaky.window(history, 2)] == [2, 1]


def result(test: str, status: str, start: int, category: str | None = None) -> Result:
    return Result(test, status, "", category, "p1", "siw", False, start)


def test_outcomes_of_a_run_one_per_test_the_last_result_wins() -> None:
    got = flaky.outcomes_of(
        7,
        [
            result("b", "failed", 1_796_000_000_000, "Product failures"),
            result("a", "passed", 1_796_000_001_000),
            result("b", "passed", 1_796_000_002_000),  # a rerun of b
        ],
    )
    assert [(o.run, o.test, o.status) for o in got] == [(7, "a", "passed"), (7, "b", "passed")]
    assert {o.night for o in got} == {"2026-11-30T00:53:20Z"}


def test_the_history_file_keeps_the_last_runs(tmp_path: Path) -> None:
    for run in range(1, 6):
        kept = flaky.record(tmp_path, nights(t="P" * run)[-1:], keep=3)
    assert [o.run for o in kept] == [3, 4, 5]
    lines = (tmp_path / flaky.OUTCOMES_HISTORY).read_text().splitlines()
    assert [json.loads(line)["run"] for line in lines] == [3, 4, 5]
    assert set(json.loads(lines[0])) == {
        "run", "night", "test", "status", "category", "pair", "provider", "known_flaky",
    }  # fmt: skip


def test_a_broken_history_line_is_named(tmp_path: Path) -> None:
    (tmp_path / flaky.OUTCOMES_HISTORY).write_text('{"run": 1}\n')
    with pytest.raises(InputError, match=r"outcomes.jsonl:1: not an outcome record"):
        flaky.load(tmp_path / flaky.OUTCOMES_HISTORY)


def test_summary_and_environment_lines() -> None:
    ranked = flaky.rank(nights(t="PFP", u="PPP"), 14)
    lines = flaky.summary_lines(ranked, 3)
    assert lines[0].startswith("flaky: 1 test flipped between pass and fail in the last 3 nights")
    assert flaky.summary_lines([], 2) == [
        "flaky: no test flipped between pass and fail in the last 2 nights"
    ]
    assert flaky.properties([], 2) == {
        "flaky": "no test flipped between pass and fail in the last 2 nights"
    }
    assert lines[1:] == ["  2 flips  PFP  t  (p1, siw)"]
    props = flaky.properties(ranked, 3)
    assert props["flaky.01"] == "2 flips  PFP  t  (p1, siw)"
    assert "summary.txt" in props["flaky"]
    known = Result("k", "failed", "known flaky: x", KNOWN_FLAKY, None, None, True, 0)
    assert flaky.known_flaky_line([known, result("a", "failed", 0)]) == (
        "known flaky: 1 failed, reported apart, not failing the run: k"
    )
    assert flaky.known_flaky_line([result("a", "failed", 0)]) is None


def test_the_summary_lists_each_known_kernel_finding_with_its_tests(tmp_path: Path) -> None:
    label = {"name": "known_kernel_finding", "value": "siw-x"}
    for name, labels in (("t2", [label]), ("t1", [label]), ("t3", [])):
        data: dict[str, Any] = {
            "name": name,
            "status": "passed",
            "labels": [{"name": "nodeid", "value": name}],
        }
        data["labels"] += labels
        (tmp_path / f"{name}-result.json").write_text(json.dumps(data))
    read = results.read(tmp_path)
    assert {r.test: r.known_kernel for r in read} == {"t1": ("siw-x",), "t2": ("siw-x",), "t3": ()}
    assert flaky.known_kernel_lines(read) == [
        "known kernel finding: siw-x (reported apart, not failing the test) in t1, t2"
    ]
    assert flaky.known_kernel_lines([]) == []
