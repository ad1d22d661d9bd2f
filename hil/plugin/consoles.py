"""A virtual lab guest's console log as a crashed host's last kernel lines.

A guest that panicked or froze cannot stream its kernel log any more; its
console file on the controller still has it.  Only an inventory written by
``hil lab`` names such files; for any other inventory these find nothing.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hil.errors import HilError
from hil.host.liveness import Crash

CONSOLE_LINES = 40


def _consoles(config: pytest.Config) -> dict[str, Path]:
    """Each virtual lab guest's console log, when the inventory is a lab's (none else)."""
    path = config.getoption("hil_inventory")
    if not path:
        return {}
    from hil.lab.state import load

    try:
        lab = load(Path(path).parent)
    except HilError:
        return {}
    return {} if lab is None else {g.name: Path(g.log) for g in lab.guests}


class GuestConsoles:
    """The guests' consoles as one test sees them: what each took since :meth:`mark`
    is the test's.  Made per test; its TestRun holds :meth:`describe`."""

    def __init__(self, config: pytest.Config) -> None:
        self._config = config
        self._at: dict[str, int] = {}  # each guest's console size when the test was armed

    def mark(self) -> None:
        """Note where each guest's console ends now: what it takes after is the test's."""
        sizes = {}
        for host, log_path in _consoles(self._config).items():
            try:
                sizes[host] = log_path.stat().st_size
            except OSError:
                continue
        self._at = sizes

    def describe(self, crash: Crash) -> Crash:
        """The crash with a virtual lab guest's console tail, when the lab keeps one."""
        log_path = _consoles(self._config).get(crash.host)
        if log_path is None:
            return crash
        try:
            data = log_path.read_bytes()
        except OSError:
            return crash
        since = self._at.get(crash.host, len(data))
        tail = data.decode(errors="replace").splitlines()[-CONSOLE_LINES:]
        fresh = data[since:].decode(errors="replace").splitlines()
        return crash.with_console(tail, f"console {log_path}", fresh)
