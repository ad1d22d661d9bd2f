"""What a listener's host kernel holds for it: connections its provider has not accepted
yet, and the child cm_ids of requests not answered yet.

The refused-child case (:mod:`hil.cm.regressions.iwcm`) needs exactly one request held
unretrieved by rdma_ucm; silence on the active side cannot tell that from a connection
siw never took from its TCP listener.  siw's listening endpoint has as many work
elements as the listen backlog (``siw_create_listen``: ``siw_cm_alloc_work(cep,
backlog)``), and each new connection queues one ACCEPT work on it from softirq
(``siw_cm_llp_state_change``); when a second handshake completes before ``siw_cm_wq``
ran the first ACCEPT, the queueing fails ("no work available", ignored) and that
connection waits in the listening socket's accept queue, its MPA request unread, until
a later connection's ACCEPT takes it or the listener goes (6.1 and 6.12 alike; seen on
the 6.12 lab under load).  The listening socket's ``ss`` Recv-Q counts those; ``rdma
resource show cm_id`` lists the children rdma_cm made for requests it got.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from hil import tools

if TYPE_CHECKING:
    from hil.agent.agent import Agent

POLL_S = 0.2  # between two looks while waiting for the first child to show
CALL_S = 20.0  # one `ss` or `rdma` run on a loaded lab guest


@dataclass(frozen=True)
class Held:
    """One look at a listener's port on its host: ``unaccepted`` connections in the
    listening socket's accept queue (None: no listening socket found), ``children`` the
    cm_ids on the port in state CONNECT (requests rdma_cm got and nobody answered)."""

    unaccepted: int | None
    children: int


def accept_queue(ss_lines: str, port: int) -> int | None:
    """The accept queue length (Recv-Q) of the socket listening on ``port`` in ``ss
    -Hltn`` output; None when no line listens there."""
    for line in ss_lines.splitlines():
        cols = line.split()
        if len(cols) >= 4 and cols[0] == "LISTEN" and _port_of(cols[3]) == port:
            return int(cols[1])
    return None


def connecting_children(rows: list[dict[str, Any]], port: int) -> int:
    """How many cm_ids of ``rdma -j resource show cm_id``'s ``rows`` are in state CONNECT
    on local ``port``."""
    return ids_in_state(rows, "CONNECT", port)


def ids_in_state(rows: list[dict[str, Any]], state: str, port: int) -> int:
    """How many cm_ids of ``rdma -j resource show cm_id``'s ``rows`` are in ``state`` on
    local ``port`` (older iproute2 puts the port in ``src-port``, newer in ``src-addr``)."""
    count = 0
    for cm in rows:
        local = cm.get("src-port")
        if local is None:
            local = _port_of(str(cm.get("src-addr", "")))
        if cm.get("state") == state and local == port:
            count += 1
    return count


def look(agent: Agent, port: int) -> Held:
    """What ``agent``'s host kernel holds for the listener on ``port`` now (both reads
    at once: each is a process start on a guest, a quarter second under load)."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        ids = pool.submit(children, agent, port)
        ss = agent.run(tools.argv("ss", "-Hltn", "sport", "=", f":{port}"), CALL_S, check=True)
        return Held(accept_queue(ss.stdout, port), ids.result())


def children(agent: Agent, port: int) -> int:
    """How many cm_ids on ``agent``'s host are in state CONNECT on local ``port``."""
    return connecting_children(agent.rdma_resource_rows("cm_id", CALL_S), port)


def wait_child(agent: Agent, port: int, timeout: float) -> int:
    """Look until a cm_id in state CONNECT is on ``port`` or ``timeout``; how many the last
    look found.  With one connect made, that child means siw accepted it, read its
    request and iw_cm handed it to rdma_cm: the next connect no longer races it."""
    deadline = time.monotonic() + timeout
    found = children(agent, port)
    while not found and time.monotonic() < deadline:
        time.sleep(POLL_S)
        found = children(agent, port)
    return found


def _port_of(address: str) -> int | None:
    head, sep, tail = address.rpartition(":")
    return int(tail) if sep and head and tail.isdigit() else None
