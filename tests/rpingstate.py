"""What two lab guests held when rping between them hung, and whether that is the known
siw finding (docs/findings/siw-rtr-lost-wakeup.md): tests/lab/test_virtual_lab.py."""

from __future__ import annotations

import re

from hil.errors import CommandTimeout
from hil.ssh import SSHSession

FINDING = "siw-rtr-lost-wakeup"
CM_IDS = "rdma resource show cm_id"


def rping_state(sessions: list[SSHSession], port: str) -> str:
    """Each guest's sockets on ``port``, its CM ids and its kernel log's end; its rping
    stopped, so that the server's side does not wait out its own bound."""
    probes = (
        ["ss", "-tnoei", "state", "all", f"( sport = :{port} or dport = :{port} )"],
        CM_IDS.split(),
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


def lost_wakeup(state: str, server: str, addr: str, port: str) -> str | None:
    """The finding's mark in ``state`` (:func:`rping_state`), or None: on ``server`` the
    rping id that accepted a connection to ``addr:port`` still waits for ESTABLISHED
    (state CONNECT, a peer address), as when siw dropped the wakeup of the RTR that
    came in siw_accept's gap (siw_cm.c:1667-1690, Linux 6.1.192)."""
    section = re.search(
        rf"^--- {re.escape(server)}: {CM_IDS}\n(.*?)(?=^--- |\Z)", state, re.M | re.S
    )
    if section is None:
        return None
    for line in section[1].splitlines():
        accepted = f"src-addr {addr}:{port} dst-addr " in line and "dst-addr 0.0.0.0:0" not in line
        if accepted and " state CONNECT " in line and " comm rping " in line:
            return f"{server}'s rping id stayed in CONNECT: {line.strip()}"
    return None
