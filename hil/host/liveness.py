"""Is a host still alive while a test runs: its kernel log and a bounded liveness probe.

A :class:`Watch` follows the hosts of a pair during one test, each from a
thread of its own:

- every ``interval`` it reads the host's kernel log from a cursor (the
  agent's ``kmsg_read``, bounded by ``probe_timeout``), keeps the last
  :data:`KEEP` lines, and declares a **kernel crash** at the first line that
  says the kernel panicked or oopsed (:data:`CRASH_LINE`);
- a read that answers also proves the host alive; one that fails is
  followed by reading its uptime over SSH (same bound), which proves it
  too, unless the host has been up for less time than it was watched: it
  **rebooted** under the test (a kernel crash; its agent died with it);
- a host that proved itself alive by neither for ``bound`` seconds is
  **unreachable**: the kernel stopped (a panic that halted it, a frozen
  machine), or the machine is off.

A separate monitor thread judges the time since each host's last answer, so
a probe that blocks (a frozen host's half-open connection) cannot keep the
watch from firing: a host that stops answering is declared within
``bound + interval`` of its last answer.  The first crash is handed to
``on_crash`` once, from the monitor's or a probe's thread, and the watch
stops looking.

A panic that halts the kernel at once (``echo c > /proc/sysrq-trigger``)
never reaches the agent: the host goes unreachable, and its console (a
virtual lab guest's log, :mod:`hil.plugin.crash`) tells the panic apart.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Literal, TypeVar

from hil import tools
from hil.agent import protocol as wire
from hil.agent.client import request
from hil.agent.types import KernelLog
from hil.errors import HilError

if TYPE_CHECKING:
    from hil.host.hosts import Hosts

log = logging.getLogger(__name__)

CrashKind = Literal["kernel_crash", "unreachable"]
# A kernel log line that means the kernel is gone or no longer to be trusted.  An x86
# general protection fault is an oops whose header reads "Oops: general protection
# fault..." from 6.12 on but starts "general protection fault" in 6.1
# (arch/x86/kernel/dumpstack.c __die_header).  Reports after which the kernel runs on
# (WARNING, UBSAN, RCU stalls, hung tasks) fail the test in the after-test check
# (hil.judge.expectations.KERNEL_REPORTS); they are no crash.
CRASH_LINE = re.compile(
    r"Kernel panic - not syncing|\bOops\b|\bBUG: |kernel BUG at|general protection fault"
    r"|Internal error: |watchdog: BUG: soft lockup"
)
# Kernel log lines kept per host, for the report and to recognise a known crash by its
# frames: a KASAN kernel's BUG report puts them 25-35 lines below its title (the debug
# lab, 2026-12-06: iwcm.c:969's worker_thread frame fell past 40 lines).
KEEP = 80
CONSOLE_BEFORE = 10  # console lines kept before its first crash line
R = TypeVar("R")
DEFAULT_BOUND = 60.0  # seconds without an answer before a host is declared unreachable
MESSAGE_PREFIX = "hil: HostCrashed: "  # how a test ended by a crash fails (its report category)


@dataclass(frozen=True)
class Crash:
    """A host that crashed under a test: how it was noticed, and its last kernel lines."""

    host: str
    kind: CrashKind
    detail: str  # the crash line, or how long the host has not answered
    lines: tuple[str, ...] = ()  # kernel log lines from just before its crash line (or the last)
    source: str = "streamed by its agent"  # where ``lines`` come from

    def __str__(self) -> str:
        what = "kernel crash" if self.kind == "kernel_crash" else "unreachable"
        return f"{self.host}: {what}: {self.detail}"

    def message(self, test: str) -> str:
        """The failure message of ``test``, which this crash ended (the report files it
        under **Host crashed**: hil.report.categories)."""
        kind = "kernel crash" if self.kind == "kernel_crash" else "stopped answering"
        return f"{MESSAGE_PREFIX}{self.host}: host crashed ({kind}) during {test}: {self.detail}"

    def with_console(self, lines: Sequence[str], source: str, fresh: Sequence[str]) -> Crash:
        """This crash with the host's console attached: around the first crash line of
        ``fresh`` (what the console took during the test; a host that rebooted since has
        logged its new boot after it), else ``lines`` (the console's tail).  A crash line
        there makes the crash a kernel crash (the host stopped before its agent read it)."""
        around = around_crash(fresh)
        if around is None:
            return replace(self, lines=tuple(lines), source=source)
        crash = replace(self, lines=around, source=source)
        if self.kind == "kernel_crash":
            return crash
        found = crash_line(fresh)
        return replace(crash, kind="kernel_crash", detail=f"{found} ({self.detail})")


def crash_line(lines: Sequence[str]) -> str | None:
    """The first of ``lines`` that says the kernel crashed, or None."""
    return next((line.strip() for line in lines if CRASH_LINE.search(line)), None)


def around_crash(lines: Sequence[str]) -> tuple[str, ...] | None:
    """:data:`KEEP` of ``lines`` from :data:`CONSOLE_BEFORE` before the first crash line
    (a report's head names it: its title, and its stack follows); None without one."""
    at = next((i for i, line in enumerate(lines) if CRASH_LINE.search(line)), None)
    if at is None:
        return None
    return tuple(lines[max(0, at - CONSOLE_BEFORE) : at + KEEP - CONSOLE_BEFORE])


class Watch:
    """Watch ``names`` of ``hosts`` until :meth:`stop`; see the module doc."""

    def __init__(
        self,
        hosts: Hosts,
        names: Sequence[str],
        on_crash: Callable[[Crash], None],
        *,
        bound: float = DEFAULT_BOUND,
        interval: float | None = None,
        probe_timeout: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.hosts = hosts
        self.names = tuple(names)
        self.bound = bound
        self.interval = interval if interval is not None else min(5.0, max(0.5, bound / 6))
        self.probe_timeout = probe_timeout if probe_timeout is not None else max(1.0, bound / 2)
        self._on_crash = on_crash
        self._clock = clock
        self._stop = threading.Event()
        self._wake = {n: threading.Event() for n in self.names}  # probe now (confirm)
        self._changed = threading.Condition()  # an answer came, or a crash was declared
        self._lock = threading.RLock()
        self._last_ok = {n: clock() for n in self.names}
        self._lines: dict[str, deque[str]] = {n: deque(maxlen=KEEP) for n in self.names}
        self._cursors: dict[str, int] = {}
        self.crash: Crash | None = None
        self._started = clock()

    def start(self) -> Watch:
        """Open a kernel-log cursor on each host (bounded) and start the threads."""
        for name in self.names:
            self._cursors[name] = request(
                self.hosts.agent(name), wire.KMSG_CURSOR, wire.NoParams(), self.probe_timeout
            )
        # Each host answered just now (its cursor): the bound counts from here.
        now = self._started = self._clock()
        with self._lock:
            self._last_ok = dict.fromkeys(self.names, now)
        for name in self.names:
            self._thread(self._probe_loop, name)
        self._thread(self._monitor, "monitor")
        return self

    def _thread(self, target: Callable[[str], None], name: str) -> None:
        # Daemon threads: a probe blocked on a frozen host must not keep the process alive.
        threading.Thread(target=target, args=(name,), name=f"liveness {name}", daemon=True).start()

    def lines(self, name: str) -> tuple[str, ...]:
        """The last kernel log lines read from host ``name``."""
        with self._lock:
            return tuple(self._lines[name])

    def confirm(self) -> Crash | None:
        """After a test failed, whether a host crashed: probe every host now and wait
        until each has answered since, or a crash is declared (at most ``bound`` plus a
        probe).  A test that failed because its host died is then told apart from one
        that failed on a live pair."""
        asked = self._clock()
        for wake in self._wake.values():
            wake.set()
        deadline = time.monotonic() + self.bound + self.interval + self.probe_timeout
        with self._changed:
            while self.crash is None and not self._all_answered_since(asked):
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._changed.wait(min(left, 0.5))
        return self.crash

    def _all_answered_since(self, asked: float) -> bool:
        with self._lock:
            return all(t >= asked for t in self._last_ok.values())

    def stop(self) -> Crash | None:
        """Stop watching; close the cursors of hosts that did not crash (once).  The
        crash, if any."""
        self._stop.set()
        for wake in self._wake.values():
            wake.set()
        crashed = None if self.crash is None else self.crash.host
        cursors, self._cursors = self._cursors, {}
        for name, cursor in cursors.items():
            if name == crashed:
                continue
            try:
                self._kmsg(name, wire.KMSG_CLOSE, cursor)
            except HilError as e:
                log.debug("%s: closing the liveness cursor failed: %s", name, e)
        return self.crash

    def _kmsg(self, name: str, method: wire.Method[wire.CursorParams, R], cursor: int) -> R:
        """One kernel-log call on ``cursor`` of host ``name``, within the probe's bound."""
        params = wire.CursorParams(cursor=cursor)
        return request(self.hosts.agent(name), method, params, self.probe_timeout)

    # -- the threads ------------------------------------------------------------

    def _probe_loop(self, name: str) -> None:
        wake = self._wake[name]
        while not self._stop.is_set():
            wake.clear()
            started = self._clock()
            if self._probe(name):
                with self._lock:
                    self._last_ok[name] = started
                self._notify()
            wake.wait(self.interval)

    def _notify(self) -> None:
        with self._changed:
            self._changed.notify_all()

    def _probe(self, name: str) -> bool:
        """One probe of ``name``: True when it answered (kernel log read, or SSH ran)."""
        cursor = self._cursors.get(name)
        if cursor is None:
            return False  # stopped meanwhile
        try:
            raw = self._kmsg(name, wire.KMSG_READ, cursor)
        except HilError as e:
            log.debug("%s: liveness: kernel log read failed: %s", name, e)
            return self._ssh_alive(name)
        messages = KernelLog.from_wire(raw).messages()
        with self._lock:
            before = tuple(self._lines[name])
            self._lines[name].extend(messages)
        found = crash_line(messages)
        if found is not None:
            # The report from its head on: a long one (KASAN's) overruns the last lines.
            around = around_crash((*before, *messages)) or self.lines(name)
            self._declare(Crash(name, "kernel_crash", found, around))
        return True

    def _ssh_alive(self, name: str) -> bool:
        """The host's uptime over SSH: it answers; up for less than it has been watched,
        it rebooted under the test (a panic with ``panic=N``, a watchdog, a reset)."""
        try:
            result = self.hosts.session(name).run(
                tools.argv("cat", "/proc/uptime"), timeout=self.probe_timeout
            )
        except HilError as e:
            log.debug("%s: liveness: SSH probe failed: %s", name, e)
            return False
        watched = self._clock() - self._started
        try:
            up = float(result.stdout.split()[0])
        except (IndexError, ValueError):
            return True  # it answered; what it said of its uptime is no proof of a reboot
        if up < watched:
            detail = f"it rebooted during the test (up {up:.0f} s, watched for {watched:.0f} s)"
            self._declare(Crash(name, "kernel_crash", detail, self.lines(name)))
        return True

    def _monitor(self, _: str) -> None:
        while not self._stop.wait(min(self.interval, 1.0)):
            now = self._clock()
            with self._lock:
                silent = [(n, now - t) for n, t in self._last_ok.items() if now - t > self.bound]
            for name, quiet in silent:
                detail = (
                    f"no answer from its agent or SSH for {quiet:.0f} s "
                    f"(liveness bound {self.bound:g} s)"
                )
                self._declare(Crash(name, "unreachable", detail, self.lines(name)))

    def _declare(self, crash: Crash) -> None:
        with self._lock:
            if self.crash is not None or self._stop.is_set():
                return
            self.crash = crash
        self._stop.set()
        for wake in self._wake.values():
            wake.set()
        self._notify()
        log.warning("liveness: %s", crash)
        self._on_crash(crash)
