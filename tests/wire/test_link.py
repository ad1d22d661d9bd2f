"""Linking a timeline's connects to the wire's connections when a 4-tuple is used twice.

Two rounds of one test (a race sweep's) connect from the same source port, one
after the other: each connect is the TCP connection of its own time window, never
the other round's.  Packets and timelines are typed by hand (test_rules.py's
helpers); ``placed`` says whether the packets carry timeline times.
"""

from __future__ import annotations

from dataclasses import replace

from test_rules import A, P, ev, fin_close, handshake, timeline

from hil.judge.profiles import SIW
from hil.judge.timeline import Action, Event
from hil.wire.judge import judge
from hil.wire.link import link
from hil.wire.model import Connection, Exchange, Packet, endpoint_text

LATER_MS = 50.0  # round 2 begins this long after round 1


def later(packets: list[Packet], frames: int = 100) -> list[Packet]:
    """The same packets, ``LATER_MS`` later (timeline and capture clock) and renumbered."""
    shift = int(LATER_MS * 1000)
    return [
        replace(
            p,
            frame=p.frame + frames,
            wall_us=p.wall_us + shift,
            t_us=None if p.t_us is None else p.t_us + shift,
        )
        for p in packets
    ]


def addressed(e: Event, conn: str) -> Event:
    """``e`` of connection ``conn``, with the 4-tuple its id's route carries."""
    mine, peer = (A, P) if e.side == "a" else (P, A)
    return replace(e, conn=conn, local=endpoint_text(mine), remote=endpoint_text(peer))


def round_items(n: int, accepted: bool) -> list[Action | Event]:
    """Round ``n`` (1, 2) of a race: a connect, its CONNECT_REQUEST, then the passive side
    accepts (both ESTABLISHED) or destroys its id before any reply (the connect fails)."""
    at = (n - 1) * LATER_MS * 1000
    conn, a_id, b_id = f"r{n}", f"a:{n}", f"b:{n + 10}"
    params = {"dst": P[0], "port": P[1], "private_data": "686966", "listener": True}
    items: list[Action | Event] = [
        Action(t_us=int(at + 500), side="a", name="connect", id=a_id, params=params),
        addressed(ev("b", at / 1000 + 1.5, "CONNECT_REQUEST", b_id, "686966"), conn),
    ]
    if not accepted:
        return [
            *items,
            Action(t_us=int(at + 1600), side="b", name="destroy", id=b_id),
            addressed(ev("a", at / 1000 + 2.5, "CONNECT_ERROR", a_id), conn),
        ]
    return [
        *items,
        Action(t_us=int(at + 1600), side="b", name="accept", id=b_id),
        addressed(ev("a", at / 1000 + 2.5, "ESTABLISHED", a_id), conn),
        addressed(ev("b", at / 1000 + 2.6, "ESTABLISHED", b_id), conn),
    ]


def two_rounds(placed: bool) -> Exchange:
    """Round 1 accepted and closed; round 2 on the same 4-tuple: a request, never a reply."""
    first = handshake() + fin_close()
    second = later(handshake()[:4] + [replace(fin_close()[0], flags=frozenset({"RST"}))])
    if not placed:
        first, second = ([replace(p, t_us=None) for p in ps] for ps in (first, second))
    conns = tuple(Connection(A, P, tuple(ps)) for ps in (first, second))
    return Exchange(conns, ("hA",), {"hA": 100} if placed else {})


def test_each_round_is_linked_to_the_connection_of_its_own_time() -> None:
    exchange = two_rounds(placed=True)
    tl = timeline(*round_items(1, accepted=True), *round_items(2, accepted=False))
    links = link([tl], exchange)
    assert [lk.conn for lk in links] == ["r1", "r2"]
    assert [lk.wire for lk in links] == list(exchange.connections)
    assert [lk.how for lk in links] == ["4-tuple", "4-tuple"]


def test_unplaced_packets_link_the_rounds_in_the_order_they_began() -> None:
    exchange = two_rounds(placed=False)
    tl = timeline(*round_items(1, accepted=True), *round_items(2, accepted=False))
    assert [lk.wire for lk in link([tl], exchange)] == list(exchange.connections)


def test_round_one_timeline_listed_after_round_two_still_gets_the_first_connection() -> None:
    exchange = two_rounds(placed=True)
    one, two = timeline(*round_items(1, accepted=True)), timeline(*round_items(2, False))
    links = link([two, one], exchange)
    assert [lk.wire for lk in links] == [exchange.connections[1], exchange.connections[0]]


def test_an_accept_is_judged_on_its_own_rounds_reply_when_the_4_tuple_is_reused() -> None:
    tl = timeline(*round_items(1, accepted=True), *round_items(2, accepted=False))
    verdict = judge(two_rounds(placed=True), [tl], SIW)
    results = {r.rule: r.outcome for r in verdict.results}
    assert results["mpa-reply-carries-accept-pdata"].status == "pass", verdict.to_text()
    assert results["mpa-request-carries-connect-pdata"].status == "pass", verdict.to_text()
