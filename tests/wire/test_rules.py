"""The wire rules on hand-built exchanges: each can pass, fail and be not applicable.

The packets here are typed by hand (the decoder is the boundary); the same
rules on real captures are in test_rules_captures.py.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from hil.errors import InputError
from hil.judge.profiles import IW_CXGB4, SIW, Profile
from hil.judge.timeline import HOLD_EGRESS, RAW_TCP, Action, ClockOffset, Event, Timeline
from hil.wire.judge import judge
from hil.wire.model import Connection, Exchange, Mpa, Packet, Terminate
from hil.wire.rule import Outcome, WireRule
from hil.wire.rules import WIRE_RULES, register_wire_rule, wire_rule_named

A = ("198.18.0.1", 40000)
P = ("198.18.0.2", 7174)


def pkt(
    n: int, src: tuple[str, int], flags: str = "ACK", t_ms: float | None = None, **kw: object
) -> Packet:
    dst = P if src == A else A
    t_us = None if t_ms is None else int(t_ms * 1000)
    return Packet(
        frame=n,
        point="hA",
        wall_us=n * 1000,
        src=src,
        dst=dst,
        flags=frozenset(flags.split(",")),
        t_us=t_us,
        **kw,  # type: ignore[arg-type]
    )


def mpa(kind: str, pdata: str = "", reject: bool = False, rev: int = 2) -> Mpa:
    return Mpa(
        kind=kind,  # type: ignore[arg-type]
        revision=rev,
        marker=False,
        crc=False,
        reject=reject,
        enhanced=rev == 2,
        private_data=pdata,
        wire_private_data="00010001" + pdata,
        ird=1,
        ord=1,
    )


def handshake(req_pdata: str = "686966", rep_pdata: str = "") -> list[Packet]:
    return [
        pkt(1, A, "SYN", 1),
        pkt(2, P, "SYN,ACK", 1.1),
        pkt(3, A, "ACK", 1.2),
        pkt(4, A, "ACK,PSH", 1.3, mpa=mpa("request", req_pdata)),
        pkt(5, P, "ACK,PSH", 2.0, mpa=mpa("reply", rep_pdata)),
    ]


def fin_close(start: int = 6, t_ms: float = 10.0) -> list[Packet]:
    return [
        pkt(start, A, "FIN,ACK", t_ms),
        pkt(start + 1, P, "FIN,ACK", t_ms + 0.1),
        pkt(start + 2, A, "ACK", t_ms + 0.2),
    ]


def exchange(packets: list[Packet], placed: bool = True) -> Exchange:
    conn = Connection(active=A, passive=P, packets=tuple(packets))
    return Exchange((conn,), ("hA",), {"hA": 100} if placed else {})


def ev(side: str, t_ms: float, type_: str, id_: str, pdata: str = "", status: int = 0) -> Event:
    return Event(
        host="hA" if side == "a" else "hB",
        side=side,
        t_us=int(t_ms * 1000),
        host_t_us=0,
        type=type_,
        id=id_,
        conn="c1",
        private_data=pdata,
        status=status,
    )


def connect(pdata: str = "686966", listener: bool = True) -> Action:
    params = {"dst": P[0], "port": P[1], "private_data": pdata, "listener": listener}
    return Action(t_us=500, side="a", name="connect", id="a:1", params=params)


def timeline(*items: Action | Event) -> Timeline:
    actions = tuple(i for i in items if isinstance(i, Action))
    events = tuple(i for i in items if isinstance(i, Event))
    offsets = (ClockOffset("hA", 0, 50), ClockOffset("hB", 0, 50))
    return Timeline("t", "siw", ("hA", "hB"), actions, events, offsets)


def connected(accept_pdata: str = "") -> list[Action | Event]:
    return [
        connect(),
        ev("b", 1.5, "CONNECT_REQUEST", "b:2", "686966"),
        Action(t_us=1600, side="b", name="accept", id="b:2", params={"private_data": accept_pdata}),
        ev("a", 2.5, "ESTABLISHED", "a:1", accept_pdata),
        ev("b", 2.6, "ESTABLISHED", "b:2"),
    ]


def run(
    packets: list[Packet], *items: Action | Event, placed: bool = True, profile: Profile = SIW
) -> dict[str, Outcome]:
    verdict = judge(exchange(packets, placed), [timeline(*items)], profile)
    return {r.rule: r.outcome for r in verdict.results}


def test_orderly_close_passes_on_fins_and_fails_on_rst() -> None:
    close = Action(t_us=5000, side="a", name="disconnect", id="a:1")
    items = [
        *connected(),
        close,
        ev("a", 10.3, "DISCONNECTED", "a:1"),
        ev("b", 10.2, "DISCONNECTED", "b:2"),
    ]
    good = run(handshake() + fin_close(), *items)
    assert good["orderly-close-is-fin"].status == "pass"
    assert good["every-teardown-event-has-a-cause"].status == "pass"
    rst = handshake() + [pkt(6, A, "RST,ACK", 10.0)]
    bad = run(rst, *items)
    assert bad["orderly-close-is-fin"].status == "fail"
    assert "1 RST" in bad["orderly-close-is-fin"].findings[0].message


def test_a_closed_sockets_answer_to_a_stray_segment_is_not_a_reset_close() -> None:
    """A duplicated last ACK reaches the passive side after its close: its RST carries
    the sequence number past its own FIN (RFC 9293 3.10.7.1), the close stays orderly."""
    items = [
        *connected(),
        Action(t_us=9000, side="a", name="disconnect", id="a:1"),
        ev("a", 10.3, "DISCONNECTED", "a:1"),
        ev("b", 10.2, "DISCONNECTED", "b:2"),
    ]
    fins = [
        pkt(6, A, "FIN,ACK", 10.0, seq=700),
        pkt(7, P, "FIN,ACK", 10.1, seq=900),
        pkt(8, A, "ACK", 10.2, seq=701),
    ]
    rule = "orderly-close-is-fin"
    assert run(handshake() + fins + [pkt(9, P, "RST", 10.3, seq=901)], *items)[rule].status == (
        "pass"
    )
    assert run(handshake() + fins + [pkt(9, P, "RST", 10.3, seq=900)], *items)[rule].status == (
        "fail"
    )


def test_a_rule_with_nothing_to_judge_is_not_applicable_never_passed() -> None:
    got = run(handshake() + fin_close(), *connected())
    for name in (
        "orderly-close-is-fin",
        "abortive-close-on-the-wire",
        "no-listener-is-rst",
        "reject-on-the-wire",
        "link-pull-on-the-wire",
        "remote-access-error-terminates",
    ):
        assert got[name].status == "n/a", name


def test_a_reject_that_failed_is_not_looked_for_on_the_wire() -> None:
    """rdma_reject on a closed id fails EINVAL and sends nothing (answer-on-closed-id-fails)."""
    late = Action(t_us=9000, side="b", name="reject", id="b:2", result="EINVAL")
    got = run(handshake() + fin_close(), *connected(), late)
    assert got["reject-on-the-wire"].status == "n/a", got["reject-on-the-wire"]


def test_abortive_close_must_not_be_fin_only_where_the_profile_says_so() -> None:
    kill = Action(t_us=5000, side="a", name="qp_err", id="a:1")
    strict = replace(SIW, wire=IW_CXGB4.wire)  # RST and/or TERMINATE, as iw_cxgb4 aborts
    fin_only = run(handshake() + fin_close(), *connected(), kill, profile=strict)
    assert fin_only["abortive-close-on-the-wire"].status == "fail"
    assert "never a FIN-only close" in fin_only["abortive-close-on-the-wire"].findings[0].message
    term = Terminate("DDP", 1, 0)
    aborted = [pkt(6, A, "ACK,PSH", 9, terminate=term), pkt(7, A, "RST", 10)]
    with_rst = run(handshake() + aborted, *connected(), kill, profile=strict)
    assert with_rst["abortive-close-on-the-wire"].status == "pass"
    # siw's emergency close is a FIN-only close (siw_qp_nextstate_from_rts): its profile
    # allows it, but the connection must still be torn down on the wire.
    assert (
        run(handshake() + fin_close(), *connected(), kill)["abortive-close-on-the-wire"].status
        == "pass"
    )
    silent = run(handshake(), *connected(), kill)["abortive-close-on-the-wire"]
    assert silent.status == "fail" and "shows nothing" in silent.findings[0].message


def test_private_data_on_the_wire_and_in_events() -> None:
    good = run(handshake(rep_pdata="6f6b") + fin_close(), *connected(accept_pdata="6f6b"))
    assert good["mpa-request-carries-connect-pdata"].status == "pass"
    assert good["mpa-reply-carries-accept-pdata"].status == "pass"
    bad = run(handshake(req_pdata="", rep_pdata="") + fin_close(), *connected(accept_pdata="6f6b"))
    assert bad["mpa-request-carries-connect-pdata"].status == "fail"
    assert bad["mpa-reply-carries-accept-pdata"].status == "fail"


@pytest.mark.parametrize(
    "on_wire, says",
    [("6869", "carries 2 bytes"), ("68696600", "carries 4 bytes"), ("686967", "at byte 2")],
    ids=["truncated", "extended", "other"],
)
def test_private_data_on_the_wire_must_be_exactly_the_calls(on_wire: str, says: str) -> None:
    """The MPA request, reply and reject each carry exactly what the call gave: one byte
    lost, added or changed fails its rule."""
    req = run(handshake(req_pdata=on_wire) + fin_close(), *connected())
    text = req["mpa-request-carries-connect-pdata"].findings[0].message
    assert says in text and "not the 3 bytes '686966' rdma_connect gave" in text
    rep = run(handshake(rep_pdata=on_wire) + fin_close(), *connected(accept_pdata="686966"))
    assert says in rep["mpa-reply-carries-accept-pdata"].findings[0].message
    rejected = [
        *handshake()[:4],
        pkt(5, P, "ACK,PSH", 2.0, mpa=mpa("reply", on_wire, reject=True)),
        *fin_close(),
    ]
    reject = Action(t_us=1600, side="b", name="reject", id="b:2", params={"private_data": "686966"})
    request = ev("b", 1.5, "CONNECT_REQUEST", "b:2", "686966")
    got = run(rejected, connect(), request, reject, ev("a", 2.5, "REJECTED", "a:1", on_wire, -104))
    assert says in got["reject-on-the-wire"].findings[0].message


def test_an_event_before_its_cause_is_found() -> None:
    items = connected()
    early = [
        replace(i, t_us=1200)
        if isinstance(i, Event) and i.side == "a" and i.type == "ESTABLISHED"
        else i
        for i in items
    ]
    got = run(handshake() + fin_close(), *early)
    outcome = got["every-teardown-event-has-a-cause"]
    assert outcome.status == "fail"
    assert "no MPA reply on the wire before it" in outcome.findings[0].message
    assert "ESTABLISHED" in outcome.findings[0].message


def test_a_held_senders_frames_may_show_on_the_wire_as_late_as_its_hold() -> None:
    early = [
        replace(i, t_us=1200) if isinstance(i, Event) and i.type == "ESTABLISHED" else i
        for i in connected()
    ]  # both ESTABLISHED 800 µs before the reply's capture (slack 150 µs)

    def hold(address: str) -> Action:
        params = {"netdev": "eth1", "address": address, "delay_us": 1_000}
        return Action(t_us=100, side="b", name=HOLD_EGRESS, params=params)

    rule = "every-teardown-event-has-a-cause"
    assert run(handshake() + fin_close(), hold(P[0]), *early)[rule].status == "pass"
    # Held by the other host, the reply's lateness is not the hold's: still found.
    assert run(handshake() + fin_close(), hold(A[0]), *early)[rule].status == "fail"
    assert timeline(hold(P[0])).holds() == {P[0]: 1_000}
    assert timeline().holds() == {}


def test_a_fin_lost_before_the_capture_shows_by_its_retransmission() -> None:
    """netem loss drops an egress FIN before the tap: only its retransmission is seen."""
    rule = "every-teardown-event-has-a-cause"
    items = [
        *connected(),
        ev("a", 9.0, "DISCONNECTED", "a:1"),
        ev("b", 10.2, "DISCONNECTED", "b:2"),
    ]
    late = [
        pkt(6, A, "FIN,ACK", 10.0, seq=500, retransmission=True),
        pkt(7, P, "FIN,ACK", 10.1, seq=900),
    ]
    assert run(handshake() + late, *items)[rule].status == "pass"
    # With its first sending captured after the event, the FIN came too late: a finding.
    first = pkt(8, A, "FIN,ACK", 9.5, seq=500)
    assert run(handshake() + [first, *late], *items)[rule].status == "fail"
    # A first sending of a FIN after the event explains nothing.
    assert (
        run(handshake() + [replace(late[0], retransmission=False), late[1]], *items)[rule].status
        == "fail"
    )


def test_clock_rules_skip_when_packets_are_not_placed() -> None:
    got = run(handshake() + fin_close(), *connected(), placed=False)
    assert got["every-teardown-event-has-a-cause"].status == "skip"
    assert "placed" in got["every-teardown-event-has-a-cause"].reason


def test_no_usable_capture_skips_every_rule_with_the_reason() -> None:
    verdict = judge(None, [], SIW, unusable="link l1 has no capture point (capture: none)")
    assert {r.outcome.status for r in verdict.results} == {"skip"}
    assert verdict.ok and "capture: none" in verdict.results[0].outcome.reason


def test_a_bare_capture_judges_only_wire_rules() -> None:
    verdict = judge(exchange(handshake() + fin_close()), [], SIW, timeline_known=False)
    got = {r.rule: r.outcome.status for r in verdict.results}
    assert got["mpa-revision-and-flags"] == "pass"
    assert got["mpa-request-carries-connect-pdata"] == "n/a"


def test_wire_rules_are_registered_by_name() -> None:
    rule = WireRule(
        "lab-own", "a lab's rule", lambda case: Outcome("pass", "x"), needs_timeline=False
    )
    register_wire_rule(rule)
    try:
        assert wire_rule_named("lab-own") is rule
        with pytest.raises(InputError, match="registered already"):
            register_wire_rule(rule)
    finally:
        WIRE_RULES.unregister(rule.name)
    with pytest.raises(InputError, match="no wire rule"):
        wire_rule_named("lab-own")


def _pull(mode: str, side: str = "b") -> list[Action | Event]:
    """A pull of host ``side``'s end while the active side (a) writes."""
    return [
        *connected(),
        Action(t_us=3000, side=side, name="pull", params={"mode": mode, "traffic": True}),
        Action(t_us=8000, side=side, name="restore", params={"mode": mode}),
    ]


def test_a_carrier_pull_must_show_retransmissions_then_silence() -> None:
    traffic = [pkt(6, A, "ACK,PSH", 2.8, length=100)]
    retrans = [pkt(7, A, "ACK,PSH", 3.5, length=100, retransmission=True)]
    assert (
        run(handshake() + traffic + retrans, *_pull("carrier"))["link-pull-on-the-wire"].status
        == "pass"
    )
    silent = run(handshake() + traffic, *_pull("carrier"))["link-pull-on-the-wire"]
    assert silent.status == "fail" and "no retransmission" in silent.findings[0].message
    revived = [pkt(8, A, "ACK,PSH", 9.0, length=100)]
    late = run(handshake() + traffic + retrans + revived, *_pull("carrier"))
    assert late["link-pull-on-the-wire"].status == "fail"


def test_an_admin_pull_needs_no_retransmission() -> None:
    # siw ends its QPs on an admin down; what its socket still held goes out on restore.
    traffic = [pkt(6, A, "ACK,PSH", 2.8, length=100)]
    flushed = [pkt(7, A, "ACK,PSH", 9.0, length=100)]
    got = run(handshake() + traffic + flushed, *_pull("admin"))["link-pull-on-the-wire"]
    assert got.status == "pass"


def test_a_pulled_writer_sends_nothing_that_arrives_until_the_link_is_back() -> None:
    traffic = [pkt(6, A, "ACK,PSH", 2.8, length=100)]
    quiet = run(handshake() + traffic, *_pull("carrier", side="a"))["link-pull-on-the-wire"]
    assert quiet.status == "pass"
    # seq 100: not the segment hA saw leave before the pull (seq 0), which was in flight.
    arrived = [replace(pkt(7, A, "ACK,PSH", 5.0, length=100, seq=100), point="hB")]
    leaked = run(handshake() + traffic + arrived, *_pull("carrier", side="a"))
    outcome = leaked["link-pull-on-the-wire"]
    assert outcome.status == "fail" and "reached its peer" in outcome.findings[0].message


def test_a_connection_made_by_hand_outside_the_cm_is_not_judged_but_noted() -> None:
    bad = [pkt(1, A, "SYN", 1), pkt(2, P, "SYN,ACK", 1.1), pkt(3, A, "ACK,PSH", 1.3)]
    bad.append(replace(bad[-1], frame=4, mpa=replace(mpa("request"), revision=1, marker=True)))
    assert not judge(exchange(bad), [timeline()], SIW).ok  # a CM connection: judged, broken
    raw = Action(
        1000, "a", RAW_TCP, None, {"local": "198.18.0.1:40000", "remote": "198.18.0.2:7174"}
    )
    verdict = judge(exchange(bad), [timeline(raw)], SIW)
    assert verdict.ok, verdict.to_text()
    assert any(
        "made by hand outside the CM (raw_tcp): 198.18.0.1:40000 > 198.18.0.2:7174" in n
        for n in verdict.notes
    )


def test_a_stacks_connect_to_a_connection_made_by_hand_is_left_out_with_it() -> None:
    # The DUT connects to the reference peer's listener: the peer's side of the connection
    # is its scenario (RAW_TCP), and so the whole connection is not judged, the DUT's
    # connect included (else "no MPA request on the wire" for a connection left out).
    raw = Action(
        400, "b", RAW_TCP, None, {"local": "198.18.0.1:40000", "remote": "198.18.0.2:7174"},
        duration_us=5000,
    )  # fmt: skip
    packets = [*handshake()[:4], replace(handshake()[4], mpa=replace(mpa("reply"), marker=True))]
    established = ev("a", 2.5, "ESTABLISHED", "a:1")
    verdict = judge(exchange(packets), [timeline(connect(), established, raw)], SIW)
    assert verdict.ok, verdict.to_text()
    outcomes = {r.rule: r.outcome.status for r in verdict.results}
    assert outcomes["mpa-request-carries-connect-pdata"] == "n/a", verdict.to_text()
    assert not judge(exchange(packets), [timeline(connect(), established)], SIW).ok


def _listener_destroyed_then_closed(close_ms: float) -> list[Action | Event]:
    """c1 accepted through listener b:1, which is destroyed at 3 ms; the test closes c1
    at ``close_ms``."""
    items = connected()
    request = items[1]  # c1's CONNECT_REQUEST
    assert isinstance(request, Event)
    items[1] = replace(request, listen_id="b:1")
    return [
        Action(t_us=0, side="b", name="listen", id="b:1", params={"port": P[1]}),
        *items,
        Action(t_us=3000, side="b", name="destroy", id="b:1"),
        Action(t_us=int(close_ms * 1000), side="a", name="disconnect", id="a:1"),
    ]


def test_a_listener_destroy_must_leave_its_accepted_connection_alone_on_the_wire() -> None:
    """siw closing accepted sockets with the listener's: FINs 0.5 ms after the destroy, the
    DISCONNECTED come before the test's own close, which then succeeds on a closed id."""
    rule = "listener-destroy-keeps-accepted"
    good = run(handshake() + fin_close(t_ms=20.0), *_listener_destroyed_then_closed(19.9))
    assert good[rule].status == "pass", good[rule]
    closed = [pkt(6, P, "FIN,ACK", 3.5), pkt(7, A, "FIN,ACK", 3.6), pkt(8, P, "ACK", 3.7)]
    events = [ev("b", 3.8, "DISCONNECTED", "b:2"), ev("a", 3.9, "DISCONNECTED", "a:1")]
    bad = run(handshake() + closed, *_listener_destroyed_then_closed(19.9), *events)
    assert bad[rule].status == "fail"
    assert bad["orderly-close-is-fin"].status == "pass"  # what judged it before: blind to it
    (finding,) = bad[rule].findings
    assert finding.message == (
        "b:destroy b:1 -> ok @3.000ms (the listener) was followed by FIN on its accepted "
        "connection before a:disconnect a:1 -> ok @19.900ms"
    )
    rst = run(handshake() + [pkt(6, P, "RST,ACK", 3.5)], *_listener_destroyed_then_closed(19.9))
    assert "RST on its accepted connection" in rst[rule].findings[0].message


def test_a_connection_the_test_closed_before_the_listener_destroy_is_not_judged() -> None:
    items = _listener_destroyed_then_closed(2.9)
    got = run(handshake() + fin_close(t_ms=3.5), *items)
    assert got["listener-destroy-keeps-accepted"].status == "n/a"


def test_a_rejected_after_the_peers_fin_before_any_mpa_reply_has_its_cause() -> None:
    """siw closes the socket of an rdma_accept it refused: the active side's REJECTED
    follows the FIN (siw_cm.c:1086-1095); with neither FIN, RST nor reject it fails."""
    request = ev("b", 1.5, "CONNECT_REQUEST", "b:2", "686966")
    refused = Action(t_us=1600, side="b", name="accept", id="b:2", result="EINVAL")
    rejected = ev("a", 2.5, "REJECTED", "a:1", "", -104)
    fin = [pkt(5, P, "FIN,ACK", 2.0), pkt(6, A, "FIN,ACK", 2.6), pkt(7, P, "ACK", 2.7)]
    got = run(handshake()[:4] + fin, connect(), request, refused, rejected)
    assert got["every-teardown-event-has-a-cause"].status == "pass"
    silent = run(handshake()[:4], connect(), request, refused, rejected)
    assert (
        "no MPA reject, RST or FIN"
        in silent["every-teardown-event-has-a-cause"].findings[0].message
    )


@pytest.mark.parametrize("down", ["pull", "flap"])
def test_a_disconnected_after_a_link_down_needs_no_packet(down: str) -> None:
    # siw ends its QPs at an admin down (siw_netdev_down): nothing reaches the wire first.
    traffic = [pkt(6, A, "ACK,PSH", 2.8, length=100)]
    lost = ev("a", 4.0, "DISCONNECTED", "a:1")
    flap = Action(t_us=3000, side="a", name=down, params={"mode": "admin", "traffic": True})
    got = run(handshake() + traffic, *connected(), flap, lost)
    assert got["every-teardown-event-has-a-cause"].status != "fail"
    alone = run(handshake() + traffic, *connected(), lost)["every-teardown-event-has-a-cause"]
    assert alone.status == "fail"
