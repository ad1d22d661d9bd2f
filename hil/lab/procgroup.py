"""The process groups of the lab's guests: vng, QEMU and the cat that logs them.

A guest runs in a session of its own (it outlives ``hil lab up``).  Its
group is signalled only while a live member is ours (our QMP path in its
argv), since a gone group's number may be reused; the vng and cat this
process started are reaped, so that none is left as a zombie.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from hil.errors import LabError
from hil.lab.state import pgid_of

TERM_TIMEOUT = 5.0
# vng processes started by this process, reaped by guests.stop() so that none is
# left as a zombie (the CLI exits and leaves reaping to init instead).
_children: dict[int, subprocess.Popen[bytes]] = {}
# The cat that copies each of them (by its pid) to the guest's log.
_loggers: dict[int, subprocess.Popen[bytes]] = {}


def track(proc: subprocess.Popen[bytes], logger: subprocess.Popen[bytes]) -> None:
    """Remember a vng this process started and the cat logging it, for :func:`reap`."""
    _loggers[proc.pid] = logger
    _children[proc.pid] = proc


def kill_if_ours(pgid: int, marker: str) -> None:
    """:func:`kill_group` ``pgid`` while a live member has ``marker`` (our QMP path) in its argv."""
    # Signal the group only while it still holds our processes: after they
    # are gone its number may be reused by someone else's.
    if _group_alive(pgid) and _group_is_ours(pgid, marker):
        kill_group(pgid)


def _group_is_ours(pgid: int, marker: str) -> bool:
    """Whether a live member of ``pgid`` has ``marker`` (our QMP path) in its argv."""
    for pid in _group_members(pgid):
        try:
            if marker.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                return True
        except OSError:
            continue
    return False


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    # Zombies still count as members; only live ones matter.
    return any(_is_live(p) for p in _group_members(pgid))


def _group_members(pgid: int) -> list[int]:
    members = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and pgid_of(int(entry.name)) == pgid:
            members.append(int(entry.name))
    return members


def _is_live(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def kill_group(pgid: int) -> None:
    """SIGTERM to group ``pgid``, then SIGKILL; LabError if it survives both."""
    for sig, wait in ((signal.SIGTERM, TERM_TIMEOUT), (signal.SIGKILL, TERM_TIMEOUT)):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait
        while _group_alive(pgid) and time.monotonic() < deadline:
            reap(pgid, block=False)
            time.sleep(0.1)
        if not _group_alive(pgid):
            return
    raise LabError(f"process group {pgid} survived SIGKILL; check `ps -g {pgid}`")


def reap(pid: int, block: bool = True) -> None:
    """Wait for vng ``pid`` and its cat if we started them (``block`` False: only poll)."""
    for table in (_children, _loggers):
        proc = table.get(pid)
        if proc is None:
            continue
        try:
            proc.wait(timeout=TERM_TIMEOUT if block else 0)
        except subprocess.TimeoutExpired:
            return
        table.pop(pid, None)
