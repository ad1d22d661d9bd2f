"""The wire rule ``event-addresses-on-the-wire``: each event's addresses are its
connection's 4-tuple on the wire (docs/wire.md).

An event's ``local``/``remote`` are its id's ``route.addr`` (what
``rdma_get_local_addr`` and ``rdma_get_peer_addr`` return), which cma.c fills
from the provider's CONNECT_REQUEST and CONNECT_REPLY (``iw_conn_req_handler``,
``cma_iw_handler``; siw_cm.c ``siw_cm_upcall`` takes them from its socket,
6.1.192 siw_cm.c:356-357).  The TCP connection that carried the connection's
MPA request and reply is the one those addresses name: the active end's local
is that connection's SYN sender, its remote the listener's end; the passive
end's are the same two, mirrored.
"""

from __future__ import annotations

from collections.abc import Iterator

from hil.judge.timeline import Event
from hil.wire.link import Link, parse_endpoint
from hil.wire.model import Connection, Endpoint, canonical, endpoint_text
from hil.wire.rule import Outcome, WireCase, WireFinding, evidence, judged, link_host


def _same(text: str, ep: Endpoint) -> bool:
    """Whether ``"ip:port"`` names ``ep`` (addresses compared as addresses, not text)."""
    return parse_endpoint(text) == canonical(ep)


def _fits(e: Event, conn: Connection, active_side: str) -> bool:
    """Whether ``e``'s addresses are ``conn``'s 4-tuple, seen from ``e``'s end."""
    mine, peer = (
        (conn.active, conn.passive) if e.side == active_side else (conn.passive, conn.active)
    )
    return _same(e.local, mine) and _same(e.remote, peer)


def _carriers(case: WireCase, lk: Link) -> list[Connection]:
    """The wire connections ``lk``'s events may name: its own, and when the connecting host
    retries with MPA v1 on a new TCP connection (cxgb4), every one that carried a request."""
    assert lk.wire is not None
    if not case.profile.of(link_host(lk, "active")).mpa_v1_retry:
        return [lk.wire]
    return [c for c in case.exchange.connections if c.mpa("request") is not None]


def _wrong(case: WireCase, lk: Link) -> Iterator[WireFinding]:
    assert lk.wire is not None
    carriers = _carriers(case, lk)
    for e in lk.events():
        if e.local and e.remote and not any(_fits(e, c, lk.active_side) for c in carriers):
            mine, peer = (
                (lk.wire.active, lk.wire.passive)
                if e.side == lk.active_side
                else (lk.wire.passive, lk.wire.active)
            )
            yield WireFinding(
                f"{e.id} {e.type} on {e.host} carries {e.local} <-> {e.remote}, but the TCP "
                f"connection that carried its MPA request is {endpoint_text(mine)} <-> "
                f"{endpoint_text(peer)} from that end ({lk.how})",
                lk.conn,
                evidence(lk.wire.mpa("request")),
            )


def event_addresses(case: WireCase) -> Outcome:
    """The addressed events of each linked connection whose MPA request is on the wire."""
    findings: list[WireFinding] = []
    count = 0
    for lk in case.links:
        if lk.wire is None or lk.wire.mpa("request") is None:
            continue
        # Counted by event, as the findings are: "1 of 5 broken" is one event of five.
        count += sum(1 for e in lk.events() if e.local and e.remote)
        findings += _wrong(case, lk)
    return judged(findings, count, "no connection with addressed events reached the MPA exchange")
