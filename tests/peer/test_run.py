"""The peer run's judge (hil/peer/judge.py) on hand-made records, and the DUT actions'
registry (hil/peer/run.py); the run itself is the lab's (suites/test_wire_conformance.py)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, cast, get_args

import pytest

from hil.agent.peerrun import PeerResult
from hil.agent.protocol import mpa
from hil.errors import InputError
from hil.judge.peerproviders import expect
from hil.peer.builtin import SCENARIOS
from hil.peer.judge import BOUND_SLACK_S, Observed, judge, record_text
from hil.peer.run import (
    ACTIONS,
    DRAIN_S,
    PROMPT_S,
    SEGMENT_SLACK_S,
    DutFailed,
    DutState,
    _observed,
    _on_dut,
    _segment_s,
)
from hil.peer.scenario import DutAction

MS = 1_000_000  # ns


def tx(t_ms: float, frame: str, **fields: Any) -> dict[str, Any]:
    return {"t_ns": int(t_ms * MS), "dir": "tx", "frame": frame, "fields": fields}


def rx(t_ms: float, frame: str, **fields: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {"t_ns": int(t_ms * MS), "dir": "rx", "frame": frame}
    return {**entry, "fields": fields} if fields else entry


CONNECTED = (
    tx(0, "mpa_request", rev=2, c=1),
    # siw's reply to the peer's default IRD/ORD 4 with its accept's 1/1 (peerproviders).
    rx(50, "mpa_reply", rev=2, c=1, m=0, r=0, p2p=0, ird=4, ord=1),
)
ESTABLISHED = ("connect_request", "established")


def seen(
    *record: dict[str, Any], events: tuple[str, ...] = (), troubles: tuple[str, ...] = ()
) -> Observed:
    return Observed(tuple(record), events, troubles)


def terminate(t_ms: float, layer: int, etype: int, ecode: int) -> dict[str, Any]:
    return rx(t_ms, "fpdu", opcode="terminate", layer=layer, etype=etype, ecode=ecode)


def test_a_siw_reaction_as_expected_passes() -> None:
    run = seen(
        *CONNECTED,
        tx(60, "fpdu", opcode="write", stag=0xDEAD00),
        terminate(65, 1, 1, 0),
        rx(66, "fin"),
        events=(*ESTABLISHED, "disconnected"),
    )
    verdict = judge("write-invalid-stag", "invalid_stag", "siw", run)
    assert verdict.ok, verdict.to_text()
    assert not verdict.known_finding
    assert verdict.to_text().endswith("as expected")


CUT_REPLY = (
    rx(0, "mpa_request", rev=2),
    tx(10, "mpa_reply", rev=2, pd_length=200, private_data="41" * 8),
    tx(11, "fin"),
    rx(20, "fin"),
)


def test_private_data_the_peer_never_sent_fails_unless_it_is_the_known_finding() -> None:
    leaked = Observed(CUT_REPLY, ("rejected",), (), (("rejected", "41" * 8 + "88ff" * 94),))
    verdict = judge("mpa-reply-cut-by-close", "reply_cut_by_close", "siw", leaked)
    assert verdict.ok and "kernel heap" in verdict.known_finding, verdict.to_text()
    # The same event after a reply that ended where it said: 196 bytes nobody sent.
    other = judge("x", "incomplete_reply", "siw", replace(leaked, cm_events=("unreachable",)))
    (failure,) = other.failures
    assert failure.what == (
        "the DUT's application got private data the peer never sent (kernel memory?): "
        "rejected: 196 bytes, the peer sent 8"
    )


def test_private_data_as_sent_or_a_start_of_it_passes() -> None:
    fine = Observed(CUT_REPLY, ("rejected",), (), (("rejected", "41" * 8), ("rejected", "41")))
    assert not fine.unsent_private_data()
    verdict = judge("mpa-reply-cut-by-close", "reply_cut_by_close", "siw", fine)
    (failure,) = verdict.failures  # siw's known leak expected, and not seen
    assert failure.what.startswith("expected private data the peer never sent")


def test_a_wrong_terminate_fails_citing_the_driver_source_and_the_rfc() -> None:
    run = seen(
        *CONNECTED,
        tx(60, "fpdu", opcode="write"),
        terminate(65, 0, 1, 0),
        rx(66, "fin"),
        events=(*ESTABLISHED, "disconnected"),
    )
    verdict = judge("write-invalid-stag", "invalid_stag", "siw", run)
    [failure] = verdict.failures
    assert "expected TERMINATE DDP / Tagged Buffer Error / Invalid STag" in failure.what
    assert "got RDMAP" in failure.what
    assert any("siw_qp_rx.c:562-571" in s for s in failure.sources)
    assert "RFC 5041 7.2" in failure.sources


def test_no_terminate_and_no_close_are_two_failures() -> None:
    run = seen(*CONNECTED, tx(60, "fpdu", opcode="write"), events=ESTABLISHED)
    verdict = judge("write-invalid-stag", "invalid_stag", "siw", run)
    whats = [f.what for f in verdict.failures]
    assert any("got none" in w for w in whats)
    assert "expected close 'fin', the peer saw 'none'" in whats


def test_a_close_where_none_is_expected_fails() -> None:
    run = seen(*CONNECTED, tx(60, "fpdu", opcode="send"), rx(70, "rst"), events=ESTABLISHED)
    verdict = judge("v2-connect-send", "mpa_rev2", "siw", run)
    assert [f.what for f in verdict.failures] == ["expected close 'none', the peer saw 'rst'"]


def test_cm_events_expected_in_order_others_between() -> None:
    run = seen(*CONNECTED, events=("connect_request", "route_resolved", "established"))
    assert judge("v2", "mpa_rev2", "siw", run).ok
    late = seen(*CONNECTED, events=("established", "connect_request"))
    [failure] = judge("v2", "mpa_rev2", "siw", late).failures
    assert "expected cm events connect_request, established in order" in failure.what


def test_no_cm_events_expected_means_the_application_saw_none() -> None:
    bad_key = (tx(0, "mpa_request", key="4d50412049442052657020467261d565"), rx(20, "fin"))
    assert judge("mpa-bad-key", "wrong_key", "siw", seen(*bad_key)).ok
    verdict = judge("mpa-bad-key", "wrong_key", "siw", seen(*bad_key, events=("connect_request",)))
    [failure] = verdict.failures
    assert "expected cm events none" in failure.what


def test_the_bound_is_the_close_after_the_peers_last_frame() -> None:
    bound = expect("siw", "incomplete_request").bound_s
    assert bound is not None
    on_time = seen(tx(0, "mpa_request"), rx((bound + BOUND_SLACK_S) * 1000 - 1, "fin"))
    assert judge("mpa-incomplete-request", "incomplete_request", "siw", on_time).ok
    late = seen(tx(0, "mpa_request"), rx((bound + BOUND_SLACK_S) * 1000 + 500, "fin"))
    [failure] = judge("mpa-incomplete-request", "incomplete_request", "siw", late).failures
    assert failure.what.startswith("closed 6.50 s after the peer's last frame, bound 5 s")
    assert any("siw_cm.h:75" in s for s in failure.sources)


def test_the_scenarios_own_troubles_fail_only_where_the_provider_keeps_to_the_rfc() -> None:
    troubles = ("step 5: no mpa_reply in time",)
    run = seen(*CONNECTED, events=ESTABLISHED, troubles=troubles)
    [failure] = judge("v2", "mpa_rev2", "siw", run).failures
    assert failure.what == troubles[0]
    assert failure.sources == ("the scenario v2's steps",)
    # siw's known departure stops the scenario's steps by nature: no failure of its own
    reply = seen(
        rx(0, "mpa_request"),
        tx(10, "mpa_reply"),
        tx(10, "fpdu", opcode="send"),
        rx(12, "rst"),
        events=("connect_error",),
        troubles=("DUT action recv: no receive completed",),
    )
    verdict = judge("reply-with-first-fpdu", "reply_and_fpdu_one_segment", "siw", reply)
    assert verdict.ok, verdict.to_text()
    assert "reads up to 4 bytes past the Reply" in verdict.known_finding
    assert "a known finding" in verdict.to_text()


def test_a_siw_terminate_is_judged_as_it_goes_on_the_wire() -> None:
    # Measured: siw means LLP/MPA/CRC (2, 0, 2) and sends (0, 2, 2) (peerexpect).
    run = seen(
        *CONNECTED,
        tx(60, "fpdu", opcode="send", crc="bad"),
        terminate(63, 0, 2, 2),
        rx(64, "fin"),
        events=(*ESTABLISHED, "disconnected"),
    )
    verdict = judge("send-bad-crc", "bad_crc", "siw", run)
    assert verdict.ok, verdict.to_text()
    assert "Layer and EType" in verdict.known_finding


def test_a_terminate_with_unreadable_codes_is_judged_not_raised() -> None:
    run = seen(*CONNECTED, rx(60, "fpdu", opcode="terminate", layer="?"), rx(61, "fin"))
    assert run.terminate == (-1, -1, -1)
    verdict = judge("send-bad-crc", "bad_crc", "siw", run)
    assert any("unknown layer" in f.what for f in verdict.failures)


def test_unknown_provider_or_class_is_a_clear_input_error() -> None:
    with pytest.raises(InputError, match="no peer expectations for provider 'mlx5'"):
        judge("x", "bad_crc", "mlx5", seen())
    with pytest.raises(InputError, match="no expectation for scenario 'nonsense'"):
        judge("x", "nonsense", "siw", seen())


def test_record_text_shows_one_frame_a_line() -> None:
    text = record_text([*CONNECTED, terminate(65, 1, 1, 0), rx(66, "fin")])
    lines = text.splitlines()
    assert lines[0].split() == ["0.0", "ms", "tx", "mpa_request", "rev=2", "c=1"]
    assert "layer=1 etype=1 ecode=0" in lines[2]
    assert lines[3].split() == ["66.0", "ms", "rx", "fin"]
    assert "no frame" in record_text([])


def test_every_dut_action_of_the_scenario_format_is_registered() -> None:
    assert set(ACTIONS.names()) == set(get_args(DutAction))


def test_every_built_in_has_a_siw_expectation() -> None:
    for scenario in SCENARIOS:
        assert expect("siw", scenario.expectation) is not None


def test_a_segment_waits_for_every_wait_of_the_scenario() -> None:
    scenario = SCENARIOS["mpa-incomplete-request"]
    assert _segment_s(scenario) == pytest.approx(65.0 + DRAIN_S + SEGMENT_SLACK_S)


class _Ep:
    """The DUT endpoint's two calls _observed makes (a fake at the agent boundary)."""

    def __init__(self) -> None:
        self.waits: list[tuple[str, float]] = []

    def wait(self, event: str, conn: str | None, within: float) -> None:
        self.waits.append((event, within))

    def collect(self) -> None:
        pass


class _Rec:
    def events(self) -> list[Any]:
        return []


def _state() -> tuple[DutState, _Ep]:
    ep = _Ep()
    return DutState(cast(Any, _Rec()), cast(Any, ep), "a", 4791, "198.18.0.2"), ep


def test_the_run_waits_for_the_last_expected_event_only_when_asked() -> None:
    result = PeerResult([], None, None, "", "")
    state, ep = _state()
    _observed(state, result, ("connect_request", "established"))
    assert ep.waits == [("ESTABLISHED", PROMPT_S)]
    state, ep = _state()  # a fuzz case: its verdict is never judged, so no wait
    _observed(state, result, ())
    assert ep.waits == []


class _Received:
    """The DUT's endpoint at its boundary: ``received`` answers one completion."""

    def __init__(self, status: int, data: str = "") -> None:
        self.value = {"status": status, "data": data, "error": "flushed" if status else None}

    def received(self, conn: str, wait: float) -> Any:
        return type("Out", (), {"ok": True, "value": self.value, "action": None})()


def _dut(status: int, data: str = "") -> Any:
    return type("State", (), {"ep": _Received(status, data), "conn": lambda self, a: "1.2"})()


def test_recv_checks_a_flushed_receive_when_asked_and_a_good_one_by_default() -> None:
    recv = ACTIONS["recv"].run
    recv(_dut(5), {"status": 5})  # IBV_WC_WR_FLUSH_ERR: the QP moved to ERROR
    recv(_dut(0, "68696c"), {"payload": "68696c"})
    with pytest.raises(DutFailed, match="completion status 0, not 5"):
        recv(_dut(0), {"status": 5})
    with pytest.raises(DutFailed, match="no receive completed"):
        recv(_dut(5), {})


class _Registers:
    """A DUT endpoint whose reg_mr answers as siw's would (an STag of key 0)."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, int, list[str]]] = []

    def reg_mr(self, cm_id: str, length: int, access: list[str]) -> Any:
        self.asked.append((cm_id, length, access))
        value = {"stag": 0x1200, "base": 0x7F00_0000_1000, "length": length}
        return type("Out", (), {"ok": True, "value": value, "action": None})()


def test_reg_mr_registers_on_the_connection_and_shares_the_region_with_the_peer() -> None:
    state = DutState(cast(Any, None), cast(Any, _Registers()), "a", 7174, "198.18.0.2")
    state.conn_id = "a:1"
    write = {"step": "send", "frame": "fpdu", "opcode": "write", "to": {"dut": "base+len"}}
    reg = {"step": "dut", "action": "reg_mr", "args": {"length": 64, "access": "remote_read"}}
    renewed = _on_dut(state, reg, [reg, write])
    assert cast(Any, state.ep).asked == [("a:1", 64, ["remote_read"])]
    assert renewed is not None and renewed[1]["to"] == 0x7F00_0000_1000 + 64
    assert state.shared == {"stag": 0x1200, "base": 0x7F00_0000_1000, "len": 64}
    bad = {**reg, "args": {"access": "remote_write,remote_atomic"}}
    assert _on_dut(state, bad, [bad]) is None
    assert state.troubles == [
        "DUT action reg_mr: reg_mr: access 'remote_atomic' is not one of "
        "local_write, remote_write, remote_read"
    ]


def test_ird_ord_words_a_dut_takes_for_private_data_were_sent() -> None:
    # Fuzz case 748 of seed 61206 (debug lab, 2026-12-06): a revision 2 request whose Res
    # lacks Linux's enhanced flag (res 14, not 0x10): siw handed its application the 4
    # bytes of IRD/ORD as private data. They were on the wire, after the header.
    request = mpa.encode("mpa_request", {"res": 14})
    sent = {**tx(0, "mpa_request", res=14, ird=4, ord=4, private_data=""), "raw": request.hex()}
    words = request[mpa.HEADER :].hex()
    assert len(words) == 8
    seen = Observed((sent,), ("connect_request",), (), (("connect_request", words),))
    assert not seen.unsent_private_data()
    other = replace(seen, private_data=(("connect_request", "00" * 4),))
    assert other.unsent_private_data() == ["connect_request: 4 bytes, the peer sent 0"]
