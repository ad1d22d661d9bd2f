"""What two lab guests held when rping between them hung, and whether that is the known
siw finding (docs/findings/siw-rtr-lost-wakeup.md): tests/lab/test_virtual_lab.py (over
SSH) and tests/wire/test_wire_lab.py (over hil's agent)."""

from __future__ import annotations

import json
from typing import Protocol

from hil.cm.regressions.held import connecting_children
from hil.errors import CommandTimeout
from hil.ssh import SSHSession

FINDING = "siw-rtr-lost-wakeup"


class _Output(Protocol):
    @property
    def stdout(self) -> str: ...


class Runner(Protocol):
    """What runs a command on the server: an :class:`SSHSession` or a hil agent."""

    def run(self, argv: list[str], *, timeout: float, check: bool) -> _Output: ...


def rping_state(sessions: list[SSHSession], port: str) -> str:
    """Each guest's sockets on ``port``, its CM ids and its kernel log's end; its rping
    stopped, so that the server's side does not wait out its own bound."""
    probes = (
        ["ss", "-tnoei", "state", "all", f"( sport = :{port} or dport = :{port} )"],
        ["rdma", "resource", "show", "cm_id"],
        ["dmesg", "--ctime"],
        ["pkill", "-x", "rping"],
    )
    lines = []
    for session in sessions:
        for argv in probes:
            try:
                got = session.run(argv, timeout=15, check=False)
                text = (got.stdout + got.stderr).splitlines()[-20:]
            except CommandTimeout as e:
                text = [str(e)]
            lines += [f"--- {session.name}: {' '.join(argv)}", *text]
    return "\n".join(lines)


def lost_wakeup(server: Runner, name: str, port: int) -> str | None:
    """The finding's mark on ``server`` (host ``name``), or None: read before rping is
    stopped (:func:`rping_state` stops it).  Its rping ids accepted on ``port`` still
    wait for ESTABLISHED (state CONNECT, :func:`hil.cm.regressions.held.connecting_children`),
    as when siw dropped the wakeup of the RTR that came in siw_accept's gap
    (siw_cm.c:1667-1690, Linux 6.1.192)."""
    out = server.run(["rdma", "-j", "resource", "show", "cm_id"], timeout=15, check=False).stdout
    rows = json.loads(out) if out.strip() else []
    stuck = connecting_children(rows if isinstance(rows, list) else [rows], port)
    if not stuck:
        return None
    return f"{name}: {stuck} accepted rping id(s) on port {port} still in CONNECT"
