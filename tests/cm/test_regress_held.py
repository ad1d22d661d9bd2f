"""What a listener's host holds for it (hil/cm/regressions/held.py): read from `ss` and
`rdma resource show cm_id`.

The `ss` reading runs against this machine's real `ss` and a real listening socket
that accepts nothing; the `rdma` text is what the 6.12 lab's passive guest printed
(2026-12-01) while the refused-child case held a request.
"""

from __future__ import annotations

import json
import socket
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from hil.agent.types import CommandResult
from hil.cm.regressions import held
from hil.cm.regressions.held import Held, accept_queue, connecting_children, look, wait_child

# The 6.12 lab, the case's failing run under load: one connection siw never accepted
# (the listener's Recv-Q 1, its 33-byte MPA request unread), one child rdma_ucm holds.
SS_STUCK = "LISTEN 1      1      198.18.0.2:29689    0.0.0.0:*\n"
RDMA_HOLDING = (
    '[{"ifindex":0,"ifname":"siw_data0","port":1,"cm-idn":24,"state":"LISTEN","ps":"TCP",'
    '"src-addr":"198.18.0.2:29689","dst-addr":"0.0.0.0:0"},'
    '{"ifindex":0,"ifname":"siw_data0","port":1,"cm-idn":25,"state":"CONNECT","ps":"TCP",'
    '"src-addr":"198.18.0.2:29689","dst-addr":"198.18.0.1:42256"},'
    '{"ifindex":0,"ifname":"siw_data0","port":1,"cm-idn":26,"state":"CONNECT","ps":"TCP",'
    '"src-addr":"198.18.0.2:4791","dst-addr":"198.18.0.1:42257"}]'
)


def test_the_accept_queue_is_the_listening_sockets_recv_q_in_real_ss_output() -> None:
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen(1)  # accepts nothing: both connections wait in its accept queue
        port = srv.getsockname()[1]
        clients = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(2)]
        try:
            argv = ["ss", "-Hltn", "sport", "=", f":{port}"]
            out = subprocess.run(argv, capture_output=True, text=True, timeout=10, check=True)
        finally:
            for c in clients:
                c.close()
    assert accept_queue(out.stdout, port) == 2
    assert accept_queue(out.stdout, port + 1) is None


def test_only_children_in_connect_on_the_listeners_port_count() -> None:
    assert connecting_children(json.loads(RDMA_HOLDING), 29689) == 1  # not LISTEN, nor 4791
    assert connecting_children([{"state": "CONNECT", "src-port": 7}], 7) == 1  # older rdma
    assert connecting_children([], 7) == 0  # no cm_id at all


class ScriptedHost:
    """An agent at the boundary: `ss` answers ``ss``, its cm_id rows come from ``ids`` in
    turn (the last one again once they are used up)."""

    def __init__(self, ss: str, ids: list[str]) -> None:
        self.ss, self.ids = ss, ids
        self.calls: list[list[str]] = []

    def run(self, argv: Sequence[str], timeout: float = 60.0, check: bool = False) -> CommandResult:
        self.calls.append([Path(argv[0]).name, *argv[1:]])
        return CommandResult(tuple(argv), 0, self.ss, "")

    def rdma_resource_rows(self, kind: str, timeout: float | None = None) -> list[dict[str, Any]]:
        self.calls.append(["rows", kind])
        seen = sum(1 for c in self.calls if c[0] == "rows")
        rows: list[dict[str, Any]] = json.loads(self.ids[min(seen, len(self.ids)) - 1] or "[]")
        return rows


def test_waiting_for_the_first_child_looks_until_rdma_cm_has_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(held, "POLL_S", 0.0)
    host = ScriptedHost("", ["[]", "[]", RDMA_HOLDING])
    assert wait_child(host, 29689, timeout=5) == 1  # type: ignore[arg-type]
    assert host.calls == [["rows", "cm_id"]] * 3


def test_a_child_that_never_shows_ends_the_wait_at_its_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(held, "POLL_S", 0.005)
    assert wait_child(ScriptedHost("", ["[]"]), 29689, timeout=0.02) == 0  # type: ignore[arg-type]


def test_a_look_reads_the_accept_queue_and_the_children_the_failed_run_had() -> None:
    host = ScriptedHost(SS_STUCK, [RDMA_HOLDING])
    assert look(host, 29689) == Held(1, 1)  # type: ignore[arg-type]
    assert ["ss", "-Hltn", "sport", "=", ":29689"] in host.calls
    assert look(host, 4242) == Held(None, 0)  # type: ignore[arg-type]
