"""The nightly layer's bound (hil/report/bounded.py) on real child processes."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from hil.report.bounded import run_bounded

# Sleeps ``argv[2]`` s; on SIGTERM writes "restored" to argv[1] and exits 2 (as the hil
# plugin's session does), unless argv[3] says to ignore SIGTERM.
CHILD = """
import signal, sys, time
out, sleep, term = sys.argv[1], float(sys.argv[2]), sys.argv[3]
def restore(signum, frame):
    open(out, "w").write("restored")
    sys.exit(2)
signal.signal(signal.SIGTERM, restore if term == "restore" else signal.SIG_IGN)
time.sleep(sleep)
"""


def child(tmp_path: Path, sleep: float, term: str = "restore") -> list[str]:
    return [sys.executable, "-c", CHILD, str(tmp_path / "out"), str(sleep), term]


def test_a_run_within_its_bound_keeps_its_exit_status(tmp_path: Path) -> None:
    done = run_bounded([sys.executable, "-c", "raise SystemExit(1)"], os.environ, 30, "x")
    assert (done.returncode, done.expired) == (1, None)


def test_a_run_past_its_bound_gets_sigterm_restores_and_says_which_layer_fired(
    tmp_path: Path,
) -> None:
    start = time.monotonic()
    # The bound leaves the child's python time to start and take SIGTERM on a loaded
    # machine (before its handler, SIGTERM ends it unrestored).
    done = run_bounded(child(tmp_path, 60), os.environ, 3, "pytest on suites (run 3)")
    assert time.monotonic() - start < 12
    assert (tmp_path / "out").read_text() == "restored"
    assert done.returncode == 2
    assert done.expired == (
        "timeout (nightly layer, 3 s: --timeout) waiting for pytest on suites (run 3): "
        "sent SIGTERM, on which the session restores the pair; it ended (exit 2)"
    )


def test_a_run_that_ignores_sigterm_is_killed_after_the_grace_and_says_so(
    tmp_path: Path,
) -> None:
    # As above: its python has ignored SIGTERM by the bound (2 s), not died of it.
    done = run_bounded(child(tmp_path, 60, term="ignore"), os.environ, 2, "x", grace=0.5)
    assert done.returncode == -9
    assert done.expired is not None and done.expired.endswith(
        "sent SIGTERM, it did not end within 0.5 s and was killed: its restore journal is "
        "replayed at the pair's next reservation"
    )
    assert not (tmp_path / "out").exists()
