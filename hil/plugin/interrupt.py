"""SIGTERM as an interrupt: a CI runner stops a job with SIGTERM, and the pair must
still be restored and its lease released, as after Ctrl-C.

Python's default for SIGTERM ends the process at once, with no teardown; the
journal then waits for the next reservation of the pair to be replayed.
While :func:`sigterm_as_interrupt` is active, SIGTERM raises
``KeyboardInterrupt`` in the main thread instead, which pytest treats like
Ctrl-C: the session's teardown runs.  A handler someone else installed is
left alone.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum} (SIGTERM): restoring before exit")


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM raises KeyboardInterrupt while this is active (main thread, default handler only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        yield
        return
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
