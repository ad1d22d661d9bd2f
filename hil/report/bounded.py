"""The nightly layer of :mod:`hil.timeouts`: the nightly's pytest run, bounded as a whole.

The session layer inside stops the tests first (``--hil-timeout-session``, the
nightly's bound less its margin), so a nightly that overruns normally ends
itself cleanly.  When it does not (a test that hangs past everything), the
bound here sends SIGTERM, which the hil plugin turns into a clean restore
(hil/plugin/interrupt.py); a run that has not ended :data:`TERM_GRACE_S`
later is killed, and its restore journal waits for the pair's next reservation.
"""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass

from hil.timeouts import TERM_GRACE_S, expired


@dataclass(frozen=True)
class Finished:
    """How a bounded run ended: its exit status (negative: the signal that ended it),
    and the nightly layer's message when the bound expired (None when it did not)."""

    returncode: int
    expired: str | None = None


def run_bounded(
    argv: list[str],
    env: Mapping[str, str],
    seconds: float | None,
    what: str,
    grace: float = TERM_GRACE_S,
    stop: signal.Signals = signal.SIGTERM,
) -> Finished:
    """Run ``argv`` for at most ``seconds`` (None: unbounded); past it, ``stop`` (SIGTERM;
    SIGINT for a CLI that restores on Ctrl-C), then SIGKILL ``grace`` seconds later.
    ``what`` names the run in the expiry message."""
    proc = subprocess.Popen(argv, env=dict(env))
    try:
        return Finished(proc.wait(timeout=seconds))
    except subprocess.TimeoutExpired:
        pass
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    assert seconds is not None  # wait() without a timeout does not time out
    proc.send_signal(stop)
    try:
        rc = proc.wait(timeout=grace)
        how = f"sent {stop.name}, on which the session restores the pair; it ended (exit {rc})"
    except subprocess.TimeoutExpired:
        proc.kill()
        rc = proc.wait()
        how = (
            f"sent {stop.name}, it did not end within {grace:g} s and was killed: its restore "
            "journal is replayed at the pair's next reservation"
        )
    return Finished(rc, f"{expired('nightly', seconds, what, '--timeout')}: {how}")
