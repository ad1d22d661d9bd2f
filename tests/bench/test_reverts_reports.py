"""bench/reverts: what a regression test's failure on a revert kernel was, and the CLI."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from benchmod import load_bench

REVERTS = Path(__file__).resolve().parents[2] / "bench" / "reverts"
rep = load_bench("revert_reports", "reverts/reports.py")


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("Failed: kernel log: BUG: KASAN: slab-use-after-free in cm_work_handler", "KASAN"),
        ("kernel log: refcount_t: underflow; use-after-free.", "refcount"),
        ("WARNING: possible circular locking dependency detected", "lockdep"),
        ("kernel log: WARNING: CPU: 0 PID: 201 at siw_cm.c:255 siw_cep_put", "kernel report"),
        ("hil: HostCrashed: hb: host crashed (oops) during test_x", "host crashed"),
        ("timeout (step layer, 75 s) waiting for REJECTED", "hang"),
        ("window not reached (regress-x): iwcm work queued at an id destroy", "window not reached"),
        ("kernel trace (regress-x): ids freed inside their event work (1 times)", "kernel trace"),
        ("contract FAILED: 1 violation\n  [no-event-after-destroy] ...", "contract violation"),
        ("AssertionError: REJECTED with status -22", "other"),
        # The bug's own report wins over a window the run also missed.
        ("window not reached (x): w\nkernel log: BUG: KASAN: use-after-free", "KASAN"),
    ],
)  # fmt: skip
def test_a_failure_is_read_as_its_report_kind(text: str, kind: str) -> None:
    assert rep.kind(text) == kind


def test_only_a_failure_other_than_a_window_missed_counts_as_failed() -> None:
    assert not rep.counts_as_failed([])
    assert not rep.counts_as_failed(["window not reached", "window not reached"])
    assert rep.counts_as_failed(["window not reached", "hang"])


def test_junit_reports_give_failure_texts_in_full_and_skip_reasons(tmp_path: Path) -> None:
    junit = tmp_path / "junit.xml"
    junit.write_text(
        '<testsuites><testsuite name="pytest">'
        '<testcase name="a"><failure message="Failed: x">line 1\nBUG: KASAN: y</failure></testcase>'
        '<testcase name="b"><skipped message="window not observable on this kernel (r): w"/>'
        '</testcase><testcase name="c"/></testsuite></testsuites>'
    )
    failures, skips = rep.junit_reports(junit)
    assert failures == ["Failed: x\nline 1\nBUG: KASAN: y"]
    assert skips == ["window not observable on this kernel (r): w"]


@pytest.mark.parametrize(
    ("args", "message"),
    [(["--revert", "nope"], "no revert nope"), (["--runs", "x"], "invalid int value")],
)
def test_bad_input_exits_2_with_a_message(args: list[str], message: str) -> None:
    out = subprocess.run(
        [sys.executable, str(REVERTS / "run.py"), *args, "--list"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert out.returncode == 2 and message in out.stderr


def test_list_names_every_revert_with_its_runs_and_fix() -> None:
    out = subprocess.run(
        [sys.executable, str(REVERTS / "run.py"), "--list"],
        capture_output=True, text=True, timeout=60, check=True,
    ).stdout  # fmt: skip
    for patch in REVERTS.glob("*.patch"):
        assert f"{patch.stem}  " in out
    assert "run(s)" in out and "fix: " in out
