"""What the fault campaign's tests share: processes of a netns host, and waiting."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

from netnslab import NetnsLab

from tests.agent.agenttest import wait_for

__all__ = ["children", "cut_connections", "mtu", "running", "wait_for"]


def children(pid: int) -> list[int]:
    """The direct children of ``pid``."""
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            found += [int(c) for c in (task / "children").read_text().split()]
        except FileNotFoundError:
            continue
    return found


def cut_connections(lab: NetnsLab, index: int) -> int:
    """SIGKILL every sshd serving a connection to host ``index`` (its listener's children):
    the kernel closes their sockets, as when a host's sshd dies or a firewall resets the
    connection.  Returns how many there were."""
    pids = children(lab.sshd_pid(index))
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return len(pids)


def running(lab: NetnsLab, index: int, argv: list[str]) -> list[int]:
    """Processes in host ``index``'s namespace whose command line is exactly ``argv``."""
    listing = subprocess.run(
        ["ip", "netns", "pids", lab.hosts[index].netns],
        capture_output=True,
        text=True,
        timeout=10,
        check=True,
    ).stdout
    want = "\0".join(argv) + "\0"
    found = []
    for pid in (int(p) for p in listing.split()):
        try:
            if Path(f"/proc/{pid}/cmdline").read_text() == want:
                found.append(pid)
        except (FileNotFoundError, ProcessLookupError):
            continue
    return found


def mtu(lab: NetnsLab, index: int, netdev: str) -> int:
    """The mtu of ``netdev`` on host ``index``, as the namespace itself says."""
    out = lab.exec(index, ["cat", f"/sys/class/net/{netdev}/mtu"]).stdout
    return int(out)
