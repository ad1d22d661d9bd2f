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
_CONSOLE_AT = pytest.StashKey[dict[str, int]]()  # each lab guest's console size at the call


def _consoles(item: pytest.Item) -> dict[str, Path]:
    """Each virtual lab guest's console log, when the inventory is a lab's (none else)."""
    path = item.config.getoption("hil_inventory")
    if not path:
        return {}
    from hil.lab.state import load

    try:
        lab = load(Path(path).parent)
    except HilError:
        return {}
    return {} if lab is None else {g.name: Path(g.log) for g in lab.guests}


def mark_consoles(item: pytest.Item) -> None:
    """Note where each guest's console ends now: what it takes after is the test's."""
    sizes = {}
    for host, log_path in _consoles(item).items():
        try:
            sizes[host] = log_path.stat().st_size
        except OSError:
            continue
    item.stash[_CONSOLE_AT] = sizes


def with_console(item: pytest.Item, crash: Crash) -> Crash:
    """The crash with a virtual lab guest's console tail, when the lab keeps one."""
    log_path = _consoles(item).get(crash.host)
    if log_path is None:
        return crash
    try:
        data = log_path.read_bytes()
    except OSError:
        return crash
    since = item.stash.get(_CONSOLE_AT, {}).get(crash.host, len(data))
    tail = data.decode(errors="replace").splitlines()[-CONSOLE_LINES:]
    fresh = data[since:].decode(errors="replace").splitlines()
    return crash.with_console(tail, f"console {log_path}", fresh)
