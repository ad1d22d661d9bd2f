"""kmemleak on a host whose kernel has it (the debug lab's): scan on demand, read, clear.

A scan (``echo scan > /sys/kernel/debug/kmemleak``) runs in the writer's
context and returns when done; it logs ``kmemleak: N new suspected memory
leaks`` to the kernel log, which the after-test kernel-log check fails on
(:data:`hil.judge.expectations.BAD_KERNEL_LINE`), and the file then lists
each leaked object with its allocation's stack: the report attached to the
test.  ``clear`` greys out what is listed, so the next test's scan reports
only its own leaks.  kmemleak never reports objects younger than
:data:`MIN_AGE_S`, so a scan right after a test would blame the next test
for its last leaks: :func:`scan` waits until the test is that old.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol

from hil import tools
from hil.errors import RemoteError

if TYPE_CHECKING:
    from hil.agent.types import CommandResult

PATH = "/sys/kernel/debug/kmemleak"
MIN_AGE_S = 5.0  # mm/kmemleak.c MSECS_MIN_AGE: younger objects are never reported
# A scan walks all memory: seconds under KVM, tens of seconds in a TCG guest with KASAN.
SCAN_TIMEOUT = 300.0
READ_TIMEOUT = 60.0


class _Runner(Protocol):
    def run(
        self, argv: Sequence[str], timeout: float = ..., input: str | None = ...
    ) -> CommandResult: ...


def available(agent: _Runner) -> bool:
    """Whether the host's kernel runs kmemleak (its debugfs file reads)."""
    return agent.run(tools.argv("cat", PATH), timeout=READ_TIMEOUT).status == 0


def clear(agent: _Runner, host: str) -> None:
    """Grey out every object reported so far (boot's own leaks, a previous test's)."""
    _write(agent, host, "clear", READ_TIMEOUT)


def scan(
    agent: _Runner,
    host: str,
    since: float,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> str:
    """Scan once the objects allocated by ``since`` (a ``clock`` time) can be reported;
    the new leaks' report ('' when none), then clear it."""
    wait = since + MIN_AGE_S - clock()
    if wait > 0:
        sleep(wait)
    _write(agent, host, "scan", SCAN_TIMEOUT)
    out = agent.run(tools.argv("cat", PATH), timeout=READ_TIMEOUT)
    if out.status != 0:
        raise RemoteError(host, f"reading {PATH} failed: {out.stderr.strip()}")
    if out.stdout.strip():
        clear(agent, host)
    return out.stdout.strip()


def _write(agent: _Runner, host: str, command: str, timeout: float) -> None:
    # tee, not a shell: the command goes in as its input.
    out = agent.run(tools.argv("tee", PATH), timeout=timeout, input=command)
    if out.status != 0:
        raise RemoteError(
            host,
            f"kmemleak {command} ({PATH}) failed: {out.stderr.strip()}; "
            "is the kernel's kmemleak off after an error (see its kernel log)?",
        )
