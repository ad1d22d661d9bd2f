"""A race's window widened in the kernel under test, and the kernel's word that it opened.

A race whose window lasts microseconds is not hit by a test on a lab, and user
space cannot see it when it is.  Kernel developers reproduce such races with a
debug patch that holds the window open (an ``msleep`` at the racing point) and
says so in the kernel log; ``bench/reverts/widen/<fix>.patch`` are those patches
(docs/regressions.md), built on both the fix's revert kernel and the fixed
kernel.  Each widening is off unless a test turns it on: a module parameter
``/sys/module/<module>/parameters/hil_widen_<fix>`` (milliseconds, 0 by
default), and each logs ``hil widen <fix>: window open`` (``pr_info``) when its
window opened.

:class:`Widen` turns one on for a scenario on one host, reads the kernel log
meanwhile and turns it off again; a case that must act inside the held window
waits for its marker (:meth:`Widen.wait_opened`).  ``available`` is False on a kernel without
that patch (every lab kernel but a widened one): the case then judges its
window as it did before (tracepoints, or not observable).  :meth:`Widen.on` journals
the parameter's reset before it is set, so a run killed inside the block leaves the
widening to the next reservation's replay, not on.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from hil import tools
from hil.host.journal import agent_undo

if TYPE_CHECKING:
    from hil.agent.agent import Agent
    from hil.cm.sides import PairSides
    from hil.host.journal import Journal

CALL_S = 20.0  # one sysfs read or write on a loaded debug guest
PARAM = "/sys/module/{module}/parameters/hil_widen_{fix}"
PREFIX = "hil widen {fix}:"  # every line a widening logs
MARKER = PREFIX + " window open"
POLL_S = 0.1  # between kernel log reads while a case waits for the marker


def opened(messages: list[str], fix: str) -> int:
    """How many of the kernel log's ``messages`` say ``fix``'s widened window opened."""
    marker = MARKER.format(fix=fix)
    return sum(1 for m in messages if marker in m)


class Widen:
    """``fix``'s window widening (``module``'s parameter) on at ``ms`` on ``agent``'s host
    for the ``with`` block, then off; ``opened`` counts the window's markers logged
    meanwhile, ``said`` holds the widening's own kernel log lines (``hil widen <fix>:``)."""

    def __init__(
        self,
        agent: Agent,
        module: str,
        fix: str,
        ms: int,
        restore: tuple[Journal, str] | None = None,
    ) -> None:
        self.agent, self.fix, self.ms = agent, fix, ms
        self.param = PARAM.format(module=module, fix=fix)
        self.available = False
        self.said: list[str] = []
        self._cursor: int | None = None
        self._restore = restore
        self._entry: int | None = None  # the journaled reset, while the widening is on

    @classmethod
    def on(cls, s: PairSides, side: str, module: str, fix: str, ms: int) -> Widen:
        """The widening on ``side``'s host of ``s``, its reset journaled in the session's
        restore journal (when it has one) for as long as it is on."""
        restore = None if s.journal is None else (s.journal, s.host(side))
        return cls(s.agent(side), module, fix, ms, restore)

    def __enter__(self) -> Widen:
        probe = self.agent.run(tools.argv("cat", self.param), CALL_S)
        self.available = probe.status == 0
        if self.available:
            self._cursor = self.agent.kmsg_cursor()
            if self._restore is not None:
                journal, host = self._restore
                what = f"turn the {self.fix} widening off ({self.param})"
                undo = agent_undo("run", what, argv=tools.argv("tee", self.param), input="0\n")
                self._entry = journal.change(host, undo)
            self._write(str(self.ms))
        return self

    def __exit__(self, *exc: object) -> None:
        if self._cursor is None:
            return
        self._write("0")
        if self._restore is not None and self._entry is not None:
            self._restore[0].forget(self._entry)
            self._entry = None
        self._read()
        self.agent.kmsg_close(self._cursor)
        self._cursor = None

    @property
    def opened(self) -> int:
        """How many of the window's markers were logged so far."""
        return opened(self.said, self.fix)

    def wait_opened(self, timeout: float, poll_s: float = POLL_S) -> bool:
        """Wait until the window's marker was logged; False when it was not within
        ``timeout`` or the widening is not on this kernel (a case that acts inside the
        held window, not merely while it may be open)."""
        return self.wait_said(MARKER.format(fix=self.fix), timeout, poll_s)

    def wait_said(self, text: str, timeout: float, poll_s: float = POLL_S) -> bool:
        """Wait until one of the widening's lines holds ``text`` (its marker, a hold's
        closing line); False when none did within ``timeout`` or the widening is not on
        this kernel."""
        deadline = time.monotonic() + timeout
        while self._cursor is not None:
            self._read()
            if any(text in line for line in self.said):
                return True
            if time.monotonic() + poll_s > deadline:
                return False
            time.sleep(poll_s)
        return False

    def _read(self) -> None:
        assert self._cursor is not None
        prefix = PREFIX.format(fix=self.fix)
        self.said += [m for m in self.agent.kmsg_read(self._cursor).messages() if prefix in m]

    def window(self, otherwise: bool | None, raced: bool = True) -> bool | None:
        """The window's value for :func:`hil.cm.regressions.evidence.window`: on a widened
        kernel whether its marker was logged and the case's racing step began inside the
        held window (``raced``, where the widening's time matters), else ``otherwise``
        (the case's own evidence)."""
        return self.opened > 0 and raced if self.available else otherwise

    def _write(self, value: str) -> None:
        self.agent.run(tools.argv("tee", self.param), CALL_S, input=value, check=True)
