"""This machine's ports as ``/proc/net`` lists them, and whether a port answers SSH.

``hil lab up`` picks free ports and waits for QEMU to bind them; ``status``
and ``up`` ask a guest's forwarded SSH port for its banner.
"""

from __future__ import annotations

import socket
from pathlib import Path


def listening_ports() -> set[int]:
    """TCP ports in LISTEN state on this machine (IPv4 and IPv6)."""
    return _ports(("/proc/net/tcp", "/proc/net/tcp6"), "0A")


def bound_udp_ports() -> set[int]:
    """UDP ports bound on this machine (IPv4 and IPv6)."""
    return _ports(("/proc/net/udp", "/proc/net/udp6"), "07")


def _ports(tables: tuple[str, ...], state: str) -> set[int]:
    """Local ports of the rows of ``tables`` (/proc/net/...) in ``state`` (hex)."""
    ports = set()
    for table in tables:
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            if len(fields) > 3 and fields[3] == state:
                ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


def ssh_banner(port: int, timeout: float = 10.0) -> bool:
    """Whether 127.0.0.1:``port`` answers with an SSH banner within ``timeout``.

    QEMU's user networking accepts at once and then waits for the guest, so
    this measures the guest; a TCG guest on a loaded machine can take seconds.
    """
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
            s.settimeout(timeout)
            return s.recv(64).startswith(b"SSH-")
    except OSError:
        return False
