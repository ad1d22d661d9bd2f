"""``event-addresses-on-the-wire`` on hand-built exchanges: events that name the 4-tuple
that carried their MPA exchange pass; swapped ends, a wrong port, or a 4-tuple the wire
never carried fail; nothing addressed is not applicable."""

from __future__ import annotations

from dataclasses import replace

from test_rules import A, P, connected, fin_close, handshake, run, timeline

from hil.judge.profiles import IW_CXGB4
from hil.judge.timeline import Action, Event
from hil.wire.judge import judge
from hil.wire.model import Connection, Exchange, endpoint_text

RULE = "event-addresses-on-the-wire"
A_TEXT, P_TEXT = endpoint_text(A), endpoint_text(P)


def addressed(
    active: tuple[str, str] = (A_TEXT, P_TEXT), passive: tuple[str, str] = (P_TEXT, A_TEXT)
) -> list[Action | Event]:
    """The connected timeline, each side's events carrying ``(local, remote)``."""
    ends = {"a": active, "b": passive}
    return [
        replace(i, local=ends[i.side][0], remote=ends[i.side][1]) if isinstance(i, Event) else i
        for i in connected()
    ]


def test_events_naming_the_connection_that_carried_the_mpa_exchange_pass() -> None:
    got = run(handshake() + fin_close(), *addressed())[RULE]
    assert got.status == "pass", got


def test_ipv6_events_name_their_connection_in_brackets() -> None:
    v6a, v6p = ("fd00::1", 40000), ("fd00::2", 7174)
    packets = [
        replace(p, src=v6a if p.src == A else v6p, dst=v6p if p.src == A else v6a)
        for p in handshake()
    ]
    exchange = Exchange((Connection(v6a, v6p, tuple(packets)),), ("hA",), {"hA": 100})
    items = addressed(("[fd00::1]:40000", "[fd00::2]:7174"), ("[fd00::2]:7174", "[fd00::1]:40000"))
    verdict = judge(exchange, [timeline(*items)], IW_CXGB4)
    assert {r.rule: r.outcome.status for r in verdict.results}[RULE] == "pass"


def test_a_passive_event_with_swapped_ports_fails_naming_the_wires_4_tuple() -> None:
    """The mutant event-addr-swapped: siw's CONNECT_REQUEST swaps the two ports."""
    swapped = (f"{P[0]}:{A[1]}", f"{A[0]}:{P[1]}")
    got = run(handshake() + fin_close(), *addressed(passive=swapped))[RULE]
    assert got.status == "fail"
    assert len(got.findings) == 2  # b:2's CONNECT_REQUEST and ESTABLISHED
    assert got.reason == "2 of 3 broken"  # of the three addressed events
    finding = got.findings[0]
    assert finding.message.startswith(
        f"b:2 CONNECT_REQUEST on hB carries {swapped[0]} <-> {swapped[1]}, but the TCP "
        f"connection that carried its MPA request is {P_TEXT} <-> {A_TEXT} from that end"
    )
    assert finding.connection == "c1" and "MPA request" in finding.packets[0]


def test_an_active_4_tuple_the_wire_never_carried_fails() -> None:
    """The active events name another port: the connect is linked by its target, and its
    events' 4-tuple is not the one that carried the request."""
    got = run(handshake() + fin_close(), *addressed(active=(f"{A[0]}:40001", P_TEXT)))[RULE]
    assert got.status == "fail"
    assert "a:1 ESTABLISHED on hA carries 198.18.0.1:40001" in got.findings[0].message
    assert "(target)" in got.findings[0].message


def test_local_and_remote_swapped_on_both_sides_fail() -> None:
    got = run(handshake(), *addressed((P_TEXT, A_TEXT), (A_TEXT, P_TEXT)))[RULE]
    assert got.status == "fail" and {f.message.split()[0] for f in got.findings} == {"a:1", "b:2"}


def test_without_addressed_events_or_an_mpa_request_it_is_not_applicable() -> None:
    assert run(handshake() + fin_close(), *connected())[RULE].status == "n/a"
    syn_only = handshake()[:3]
    assert run(syn_only, *addressed())[RULE].status == "n/a"
