"""The wire rules on real packets: each breaking capture fails its rule by name, and a
good capture of the same exchange passes it.

The captures in tests/data/wire/ are real connections of a small MPA peer,
recorded by tcpdump (tests/wire/make_captures.py; README.md there says how
each was made) and decoded here by the real tshark (hil.wire.decode).  The
timelines are what a hil sequence records for such a connection: the
connect's target and private data, the events with the 4-tuple the kernel
reports (taken from the capture, as the agent would read it), and the
accept, reject or disconnect.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
from pathlib import Path

import make_captures as mc
import pytest

from hil.judge.profiles import SIW
from hil.judge.timeline import Action, ClockOffset, Event, Timeline, WallSample
from hil.wire.clock import place
from hil.wire.decode import decode
from hil.wire.judge import judge
from hil.wire.model import Connection, Exchange, endpoint_text
from hil.wire.rule import Outcome

CONNECT, ACCEPT = mc.CONNECT_PDATA.hex(), mc.ACCEPT_PDATA.hex()
REJECT = mc.REJECT_PDATA.hex()
POINT = "lo"
# The clock samples read both clocks in one Python expression: well within 1 ms.
SAMPLE_SPREAD_US = 1000


def decoded(name: str, folder: Path = mc.DATA) -> Exchange:
    return decode({POINT: folder / f"{name}.pcap"}, timeout=60)


def only(exchange: Exchange) -> Connection:
    assert len(exchange.connections) == 1, [c.name for c in exchange.connections]
    return exchange.connections[0]


def connect(listener: bool = True, t_us: int = 1000) -> Action:
    params = {"dst": mc.PASSIVE, "port": mc.PORT, "private_data": CONNECT, "listener": listener}
    return Action(t_us=t_us, side="a", name="connect", id="a:1", params=params)


def ev(conn: Connection, side: str, t_ms: float, type_: str, pdata: str = "", st: int = 0) -> Event:
    """An event of the captured connection on ``side`` (a: active), with its 4-tuple."""
    local, remote = (conn.active, conn.passive) if side == "a" else (conn.passive, conn.active)
    return Event(
        host=f"host-{side}",
        side=side,
        t_us=int(t_ms * 1000),
        host_t_us=int(t_ms * 1000),
        type=type_,
        status=st,
        id="a:1" if side == "a" else "b:2",
        listen_id=None if side == "a" else "b:1",
        private_data=pdata,
        conn="c1",
        local=endpoint_text(local),
        remote=endpoint_text(remote),
    )


def timeline(*items: Action | Event) -> Timeline:
    return Timeline(
        "capture",
        "siw",
        ("host-a", "host-b"),
        tuple(i for i in items if isinstance(i, Action)),
        tuple(i for i in items if isinstance(i, Event)),
    )


def connected_and_closed(conn: Connection) -> Timeline:
    """rdma_connect, rdma_accept, ESTABLISHED on both sides, rdma_disconnect from a."""
    return timeline(
        connect(),
        ev(conn, "b", 2, "CONNECT_REQUEST", CONNECT),
        Action(t_us=2500, side="b", name="accept", id="b:2", params={"private_data": ACCEPT}),
        ev(conn, "a", 3, "ESTABLISHED", ACCEPT),
        ev(conn, "b", 3.1, "ESTABLISHED"),
        Action(t_us=5000, side="a", name="disconnect", id="a:1"),
        ev(conn, "a", 5.2, "DISCONNECTED"),
        ev(conn, "b", 5.3, "DISCONNECTED"),
    )


def rejected(conn: Connection) -> Timeline:
    """rdma_connect, rdma_reject with ``no thanks`` (REJECT_PDATA), REJECTED."""
    return timeline(
        connect(),
        ev(conn, "b", 2, "CONNECT_REQUEST", CONNECT),
        Action(t_us=2500, side="b", name="reject", id="b:2", params={"private_data": REJECT}),
        ev(conn, "a", 3, "REJECTED", REJECT, -errno.ECONNREFUSED),
    )


def no_listener() -> Timeline:
    """rdma_connect to a port nobody listens on (siw: ECONNREFUSED, no event)."""
    return timeline(Action(1000, "a", "connect", "a:1", connect(False).params, "ECONNREFUSED"))


def placed(name: str) -> tuple[Exchange, dict[str, int]]:
    """A pull capture placed on this host's CLOCK_MONOTONIC (the timeline's clock: the
    capturing host is the controller, offset 0), and the times (µs) NAME.clock.json
    recorded of the connect, the pull and the restore."""
    clock = json.loads((mc.DATA / f"{name}.clock.json").read_text())
    host = clock["host"]
    before, after = (
        WallSample(host, s["wall_ns"] // 1000, s["monotonic_ns"] // 1000, SAMPLE_SPREAD_US)
        for s in clock["samples"]
    )
    exchange = decode({host: mc.DATA / f"{name}.pcap"}, timeout=60)
    at = {k: v // 1000 for k, v in clock["monotonic_ns"].items()}
    return place({host: (before, after)}, [ClockOffset(host, 0, 0)]).apply(exchange), at


def pulled(conn: Connection, at: dict[str, int]) -> Timeline:
    """rdma_connect and rdma_accept, then a carrier pull of the passive side's end (b)
    while the active side writes, and its restore, at the capture's times."""
    established = at["established"] / 1000
    return timeline(
        connect(t_us=at["connect"]),
        ev(conn, "b", established - 0.002, "CONNECT_REQUEST", CONNECT),
        Action(at["established"] - 1, "b", "accept", "b:2", {"private_data": ACCEPT}),
        ev(conn, "a", established, "ESTABLISHED", ACCEPT),
        ev(conn, "b", established, "ESTABLISHED"),
        Action(at["pull"], "b", "pull", params={"mode": "carrier", "traffic": True}),
        Action(at["restore"], "b", "restore", params={"mode": "carrier"}),
    )


def outcomes(exchange: Exchange, tl: Timeline) -> dict[str, Outcome]:
    return {r.rule: r.outcome for r in judge(exchange, [tl], SIW).results}


def failed(got: dict[str, Outcome], rule: str) -> str:
    """The findings of ``rule``, which must have failed, as text."""
    assert got[rule].status == "fail", (rule, got[rule])
    return "\n".join(f.to_text() for f in got[rule].findings)


# -- mpa-revision-and-flags ------------------------------------------------------------


def test_a_revision_1_reply_with_crc_and_markers_fails_revision_and_flags() -> None:
    ex = decoded("mpa-bad-flags")
    conn = only(ex)
    got = outcomes(ex, connected_and_closed(conn))
    text = failed(got, "mpa-revision-and-flags")
    assert "MPA reply: revision 1 (expected [2])" in text
    assert "marker flag set" in text and "CRC flag 1 (expected 0)" in text
    assert conn.name in text and "MPA reply" in text  # the connection and the packet
    assert got["mpa-revision-and-flags"].reason == "1 of 2 broken"  # the request was right
    # Only the flags are wrong: the rest of the exchange is judged right.
    for rule in ("mpa-reply-carries-accept-pdata", "orderly-close-is-fin"):
        assert got[rule].status == "pass", (rule, got[rule])


def test_siws_reply_passes_revision_and_flags_and_a_fin_from_each_side_is_orderly() -> None:
    ex = decoded("mpa-accept-close-fin")
    got = outcomes(ex, connected_and_closed(only(ex)))
    for rule in (
        "mpa-revision-and-flags",
        "mpa-request-carries-connect-pdata",
        "mpa-reply-carries-accept-pdata",
        "orderly-close-is-fin",
    ):
        assert got[rule].status == "pass", (rule, got[rule])
    assert got["mpa-revision-and-flags"].reason == "2 judged"
    assert got["reject-on-the-wire"].status == "n/a"


# -- mpa-request-carries-connect-pdata -------------------------------------------------


def test_a_request_without_the_connects_private_data_fails_request_carries_pdata() -> None:
    ex = decoded("mpa-request-no-pdata")
    conn = only(ex)
    request = conn.mpa("request")
    assert request is not None and request.mpa is not None
    # The IRD/ORD words are there, nothing after them.
    assert (request.mpa.wire_private_data, request.mpa.ird, request.mpa.ord) == ("00010001", 1, 1)
    got = outcomes(ex, connected_and_closed(conn))
    text = failed(got, "mpa-request-carries-connect-pdata")
    assert (
        f"MPA request carries 0 bytes of private data '', not the {len(CONNECT) // 2} bytes "
        f"{CONNECT!r} rdma_connect gave" in text
    )
    assert conn.name in text and "MPA request" in text  # the connection and the packet
    for rule in (
        "mpa-reply-carries-accept-pdata",
        "mpa-revision-and-flags",
        "orderly-close-is-fin",
    ):
        assert got[rule].status == "pass", (rule, got[rule])


# -- reject-on-the-wire ----------------------------------------------------------------


def test_a_reject_with_other_private_data_and_no_teardown_fails_reject_on_the_wire() -> None:
    ex = decoded("reject-wrong-pdata-no-teardown")
    conn = only(ex)
    got = outcomes(ex, rejected(conn))
    text = failed(got, "reject-on-the-wire")
    wrong = mc.WRONG_REJECT_PDATA.hex()
    assert f"MPA reject carries {len(wrong) // 2} bytes of private data {wrong!r}" in text
    assert f"not the {len(REJECT) // 2} bytes {REJECT!r} rdma_reject gave" in text
    assert (
        "after its MPA reject the rejecting side sent no FIN or RST (expected FIN or RST)" in text
    )
    assert len(got["reject-on-the-wire"].findings) == 2
    assert conn.name in text and "MPA reply REJECT" in text


def test_a_reject_with_its_private_data_then_fin_passes_reject_on_the_wire() -> None:
    ex = decoded("reject-fin")
    got = outcomes(ex, rejected(only(ex)))
    assert got["reject-on-the-wire"].status == "pass", got["reject-on-the-wire"]
    assert got["mpa-revision-and-flags"].status == "pass"


def test_a_rejecting_side_that_never_closes_fails_reject_on_the_wire() -> None:
    # The active side's FIN after REJECTED is no teardown by the side that rejected.
    ex = decoded("reject-only-active-closes")
    got = outcomes(ex, rejected(only(ex)))
    assert "after its MPA reject the rejecting side sent no FIN or RST" in failed(
        got, "reject-on-the-wire"
    )


def test_the_wrong_reject_is_found_without_a_timeline_too() -> None:
    # `hil wire judge` on a bare capture: no rdma_reject to compare, the teardown still counts.
    ex = decoded("reject-wrong-pdata-no-teardown")
    verdict = judge(ex, [], SIW, timeline_known=False)
    outcome = next(r.outcome for r in verdict.results if r.rule == "reject-on-the-wire")
    assert outcome.status == "fail"
    assert [f.message for f in outcome.findings] == [
        "after its MPA reject the rejecting side sent no FIN or RST (expected FIN or RST)"
    ]


# -- no-listener-is-rst ----------------------------------------------------------------


def test_a_syn_nobody_answers_fails_no_listener_is_rst() -> None:
    ex = decoded("no-listener-silent")
    conn = only(ex)
    assert [p.flags for p in conn.packets] == [{"SYN"}, {"SYN"}]  # and its retransmission
    got = outcomes(ex, no_listener())
    text = failed(got, "no-listener-is-rst")
    assert "a connect with no listener must be a SYN answered by RST" in text
    assert conn.name in text and " SYN" in text


def test_a_syn_answered_by_rst_passes_no_listener_is_rst() -> None:
    ex = decoded("no-listener-rst")
    got = outcomes(ex, no_listener())
    assert got["no-listener-is-rst"].status == "pass", got["no-listener-is-rst"]


# -- orderly-close-is-fin --------------------------------------------------------------


def test_a_fin_from_one_side_then_a_rst_fails_orderly_close_is_fin() -> None:
    ex = decoded("close-fin-one-side")
    conn = only(ex)
    got = outcomes(ex, connected_and_closed(conn))
    text = failed(got, "orderly-close-is-fin")
    assert "a:disconnect a:1" in text
    assert "FIN from active, 1 RST, 0 TERMINATE (expected a FIN from each side" in text
    assert "ACK,RST" in text and "ACK,FIN" in text  # both packets are the evidence
    assert got["mpa-revision-and-flags"].status == "pass"


# -- link-pull-on-the-wire -------------------------------------------------------------


def test_a_dropped_end_makes_the_writer_retransmit_and_passes_link_pull() -> None:
    ex, at = placed("pull-carrier-retransmits")
    conn = only(ex)
    retransmitted = conn.retransmissions()
    assert retransmitted and all(at["pull"] < (p.t_us or 0) < at["restore"] for p in retransmitted)
    assert "RST" in conn.packets[-1].flags  # the writer aborted at the restore
    got = outcomes(ex, pulled(conn, at))
    assert got["link-pull-on-the-wire"].status == "pass", got["link-pull-on-the-wire"]
    assert got["link-pull-on-the-wire"].reason == "1 judged"
    # Placed right: the MPA reply is on the wire before the ESTABLISHED the script timed.
    assert got["every-teardown-event-has-a-cause"].status == "pass"


def test_a_pull_that_changed_nothing_fails_link_pull() -> None:
    ex, at = placed("pull-that-did-not-pull")
    conn = only(ex)
    assert not conn.retransmissions()
    assert any(p.length and (p.t_us or 0) > at["pull"] for p in conn.packets)  # traffic on
    tl = pulled(conn, at)
    got = outcomes(ex, tl)
    text = failed(got, "link-pull-on-the-wire")
    pull = next(a for a in tl.actions if a.name == "pull")
    assert f"{pull.brief()}: no retransmission on the pulled connection after the pull" in text
    assert conn.name in text


def test_link_pull_is_skipped_when_the_packets_are_not_placed() -> None:
    ex, at = placed("pull-carrier-retransmits")
    bare = decoded("pull-carrier-retransmits")
    got = outcomes(bare, pulled(only(ex), at))
    assert got["link-pull-on-the-wire"].status == "skip"


# -- the captures are real: the script makes them again --------------------------------


def _cannot_capture() -> str | None:
    if os.geteuid() != 0:
        return "making captures needs root (unshare --net, tcpdump, nft)"
    missing = [t for t in ("unshare", "tcpdump", "nft", "tshark") if shutil.which(t) is None]
    return f"making captures needs {', '.join(missing)}" if missing else None


def _shape(exchange: Exchange) -> list[tuple[str, str, frozenset[str], str]]:
    """What a capture shows, without its ports, sequence numbers and times."""
    conn = only(exchange)
    return [
        (
            conn.role(p),
            "" if p.mpa is None else repr(p.mpa),
            p.flags,
            "retransmission" if p.retransmission else "",
        )
        for p in conn.packets
    ]


def _pull_shape(exchange: Exchange) -> tuple[list[str], bool, bool]:
    """What a pull capture shows whatever its timing (how many writes, how many
    retransmissions): its MPA frames, whether the writer retransmitted, whether it reset."""
    conn = only(exchange)
    frames = [repr(p.mpa) for p in conn.packets if p.mpa is not None]
    reset = any("RST" in p.flags and conn.role(p) == "active" for p in conn.packets)
    return frames, bool(conn.retransmissions()), reset


@pytest.mark.netns
@pytest.mark.skipif(_cannot_capture() is not None, reason=str(_cannot_capture()))
def test_make_captures_makes_each_capture_again(tmp_path: Path) -> None:
    assert mc.main(["--out", str(tmp_path)]) == 0
    for c in mc.CAPTURES:
        made, kept = decoded(c.name, tmp_path), decoded(c.name)
        if isinstance(c.exchange, mc.Pull):
            assert _pull_shape(made) == _pull_shape(kept), c.name
            clock = json.loads((tmp_path / f"{c.name}.clock.json").read_text())
            assert len(clock["samples"]) == 2 and {"pull", "restore"} <= set(clock["monotonic_ns"])
        else:
            assert _shape(made) == _shape(kept), c.name
