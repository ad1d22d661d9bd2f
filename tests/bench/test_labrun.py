"""bench/labrun.py: how many times a suite runs on one boot (the lab itself faked)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from benchmod import load_bench

labrun = load_bench("labrun", "labrun.py")
WINDOW_MISSED = "window not reached (regress-x): iwcm work queued at an id destroy"


def _runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **options: Any) -> int:
    """How many times pytest ran: every run fails with the window missed."""
    ran: list[str] = []
    monkeypatch.setattr(labrun, "_hil", lambda *args, **kwargs: None)
    monkeypatch.setattr(labrun, "_pytest", lambda suite, *args: ran.append(str(suite)))
    monkeypatch.setattr(
        labrun, "junit_outcomes", lambda junit, path: ([("t", WINDOW_MISSED)], [], 1)
    )
    suite = labrun.patched.Suite("suites/test_regressions.py", "aee2424246f9")
    labrun.run_on_lab(None, [suite], tmp_path, repeat=3, **options)
    return len(ran)


def test_a_failing_repetition_ends_the_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert _runs(tmp_path, monkeypatch) == 1


def test_a_failure_that_decides_nothing_leaves_the_next_runs_their_chance(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert _runs(tmp_path, monkeypatch, decisive=lambda m: "window not reached" not in m) == 3


def test_each_run_keeps_its_allure_results_and_the_guests_consoles(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A regression case's window metrics live in the Allure results' hil-metrics.json,
    a guest's panic in its console, which ``hil lab down`` removes."""
    extras: list[list[str]] = []

    def up_or_down(log: Path, *args: str, timeout: float) -> None:
        lab = tmp_path / "lab"
        if args[:2] == ("lab", "up"):  # what `hil lab up` leaves in the lab's directory
            lab.mkdir()
            (lab / "lab.json").write_text("{}")
            (lab / "lab1-0.log").write_text("KASAN: use-after-free\n")
        elif args[:2] == ("lab", "down"):
            assert (tmp_path / "console-lab1-0.log").is_file(), "down before the copy"

    monkeypatch.setattr(labrun, "_hil", up_or_down)
    monkeypatch.setattr(
        labrun, "_pytest", lambda suite, inv, junit, log, extra: extras.append(extra)
    )
    monkeypatch.setattr(labrun, "junit_outcomes", lambda junit, path: ([], [], 1))
    suite = labrun.patched.Suite("suites/test_regressions.py", "aee2424246f9")
    labrun.run_on_lab(None, [suite], tmp_path, repeat=2, decisive=lambda m: False)
    assert extras == [
        ["--alluredir", str(tmp_path / "allure-0-0")],
        ["--alluredir", str(tmp_path / "allure-1-0")],
    ]
    assert (tmp_path / "console-lab1-0.log").read_text() == "KASAN: use-after-free\n"
