"""tests/rpingstate.py: the siw lost-wakeup mark, read from the server's cm_ids as in the
failure of 2026-12-07 (fresh-clone ci/tests, Linux 6.1.192 guests): its listener, and
the id it accepted for the client's connection still in CONNECT."""

from __future__ import annotations

import json
from typing import Any

from rpingstate import lost_wakeup

from hil.ssh import Result

# `rdma resource show cm_id` of that failure's server, as `rdma -j` gives the rows.
LISTENER = {
    "state": "LISTEN",
    "comm": "rping",
    "src-addr": "198.18.0.1:7174",
    "dst-addr": "0.0.0.0:0",
}
ACCEPTED = {
    "cm-idn": 3, "lqpn": 1, "qp-type": "RC", "state": "CONNECT", "comm": "rping",
    "src-addr": "198.18.0.1:7174", "dst-addr": "198.18.0.2:47253",
}  # fmt: skip


class FakeSession:
    """The server's SSH session (the boundary): ``rdma -j`` prints ``rows``."""

    def __init__(self, rows: list[dict[str, Any]]) -> None:
        self.rows = rows

    def run(self, argv: list[str], timeout: float = 60, check: bool = True) -> Result:
        assert argv == ["rdma", "-j", "resource", "show", "cm_id"]
        return Result(tuple(argv), 0, json.dumps(self.rows), "")


def test_the_servers_accepted_id_stuck_in_connect_is_the_finding() -> None:
    found = lost_wakeup(FakeSession([LISTENER, ACCEPTED]), "labbfcb-0", 7174)
    assert found == "labbfcb-0: 1 accepted rping id(s) on port 7174 still in CONNECT"


def test_a_listener_alone_an_established_id_or_another_port_is_not() -> None:
    established = {**ACCEPTED, "state": "ESTABLISHED"}
    assert lost_wakeup(FakeSession([LISTENER]), "labbfcb-0", 7174) is None
    assert lost_wakeup(FakeSession([LISTENER, established]), "labbfcb-0", 7174) is None
    assert lost_wakeup(FakeSession([LISTENER, ACCEPTED]), "labbfcb-0", 7175) is None
    assert lost_wakeup(FakeSession([]), "labbfcb-0", 7174) is None
