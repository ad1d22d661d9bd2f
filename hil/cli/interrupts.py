"""SIGINT and SIGTERM as an interrupt, so that a stopped command still restores its pair.

Every ``hil`` command runs inside :class:`Interrupts` (:func:`hil.cli.main`): the
first SIGINT or SIGTERM raises KeyboardInterrupt in the main thread, the command's
context managers (a pair run's restore and release, a lab's stop) run on the way
out, and ``main`` exits 3 with ``hil: interrupted``.  Later signals are noted, not
raised, so that the teardown finishes.  Without it SIGTERM (a CI runner's stop)
ended the process at once, and a command started in the background of a
non-interactive shell inherits SIGINT ignored, which Python keeps: the nightly's
deadline (its SIGINT) then went unheard until ``hil peer fuzz`` reached its cases.
"""

from __future__ import annotations

import signal
import threading
from typing import Any


class Interrupts:
    """While entered, SIGINT and SIGTERM note ``why`` and raise KeyboardInterrupt once;
    the handlers before are put back on exit.  The note outlives an interrupt that a
    teardown lost, so a caller can tell that its work was cut short.  Entered again
    inside (``hil peer fuzz``'s case loop), the inner one notes the signals it gets."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self) -> None:
        self.why = ""
        self._before: list[Any] = []

    def __enter__(self) -> Interrupts:
        if threading.current_thread() is threading.main_thread():
            self._before = [(s, signal.signal(s, self._on)) for s in self.SIGNALS]
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self._before:
            signal.signal(sig, handler)

    def _on(self, signum: int, frame: object) -> None:
        first = not self.why
        self.why = signal.Signals(signum).name
        if first:
            raise KeyboardInterrupt
