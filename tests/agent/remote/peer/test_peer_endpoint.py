"""Peer against peer over 127.0.0.1: one active, one passive, each running a scenario
(hil/agent/remote/peer/endpoint.py, scenario.py)."""

from __future__ import annotations

import time
from typing import Any

from peer_loopback import CLEAN, Steps, run_both

from hil.agent.remote.peer.endpoint import Endpoint
from hil.agent.remote.peer.scenario import Interpreter

HELLO, WORLD = b"hello".hex(), b"world".hex()
PATTERN = bytes(range(16)).hex()  # what a read_response sends by default: 0, 1, 2...


def both(active: Steps, passive: Steps, timeout: float = 10) -> tuple[Interpreter, ...]:
    """Run the two scenarios against each other; both interpreters, once done."""
    outcomes, runs = run_both(active, passive, timeout)
    assert all(o == CLEAN for o in outcomes), outcomes
    return runs


def send(**fields: Any) -> dict[str, Any]:
    return {"step": "send", "frame": "fpdu", **fields}


def expect(frame: str = "fpdu", **fields: Any) -> dict[str, Any]:
    return {"step": "expect", "frame": frame, "fields": fields, "within": 5}


def test_mpa_v2_then_send_write_read_both_ways_and_a_terminate() -> None:
    active = [
        {"step": "send", "frame": "mpa_request", "ird": 8, "ord": 4},
        expect("mpa_reply", rev=2, r=0, c=1, ird=4, ord=8),
        send(opcode="send", payload=HELLO),
        send(opcode="write", stag=0x100, to=0x10, payload=HELLO),
        send(opcode="read_request", sink_stag=0x200, sink_to=0, size=16, source_stag=0x300),
        expect(opcode="read_response", stag=0x200, payload=PATTERN, crc="good"),
        expect(opcode="send", msn=1, payload=WORLD),
        expect(opcode="write", stag=0x400, payload=WORLD),
        expect(opcode="read_request", size=4, msn=1),
        send(opcode="read_response"),
        send(opcode="terminate", layer=0, etype=1, ecode=2),
        {"step": "send", "frame": "fin"},
        expect("close"),
    ]
    passive = [
        expect("mpa_request", rev=2, ird=8, ord=4, p2p=0),
        {"step": "send", "frame": "mpa_reply"},
        expect(opcode="send", qn=0, msn=1, payload=HELLO),
        expect(opcode="write", stag=0x100, to=0x10, payload=HELLO),
        expect(opcode="read_request", qn=1, msn=1, sink_stag=0x200, size=16, source_stag=0x300),
        send(opcode="read_response"),
        send(opcode="send", payload=WORLD),
        send(opcode="write", stag=0x400, payload=WORLD),
        send(opcode="read_request", sink_stag=0x500, size=4),
        expect(opcode="read_response", stag=0x500, payload=PATTERN[:8]),
        expect(opcode="terminate", qn=2, layer=0, etype=1, ecode=2),
        expect("fin"),
        {"step": "send", "frame": "fin"},
    ]
    a, p = both(active, passive)
    frames = [(e["dir"], e["frame"], e.get("fields", {}).get("opcode")) for e in a.endpoint.record]
    assert frames[:3] == [
        ("tx", "mpa_request", None),
        ("rx", "mpa_reply", None),
        ("tx", "fpdu", "send"),
    ]
    assert frames[-2:] == [("tx", "fin", None), ("rx", "fin", None)]
    entry = a.endpoint.record[0]
    assert set(entry) == {"t_ns", "dir", "frame", "fields", "raw"}
    assert entry["raw"].startswith(b"MPA ID Req Frame".hex())
    stamps = [e["t_ns"] for e in a.endpoint.record]
    assert stamps == sorted(stamps)
    # The second Send on queue 0 would be MSN 2 (RFC 5041 4.3): the counter moved.
    assert a.endpoint.encode({"frame": "fpdu", "opcode": "send"})[1]["fields"]["msn"] == 2


def test_a_request_in_1_byte_segments_and_a_reply_coalesced_with_the_first_fpdu() -> None:
    """RFC 5044 Appendix A's split request, and the 2019 siw <-> cxgb4 bug's shape."""
    active = [
        {"step": "send", "frame": "mpa_request", "rev": 1, "segments": [1] * 20},
        expect("mpa_reply", rev=1),
        expect(opcode="send", payload=WORLD),
        send(opcode="send", payload=HELLO, segments=[1, 1, 3]),
    ]
    passive = [
        expect("mpa_request", rev=1),
        {"step": "send", "frame": "mpa_reply", "coalesce_with_next": True},
        send(opcode="send", payload=WORLD),
        expect(opcode="send", payload=HELLO),
    ]
    _, p = both(active, passive)
    rx = [e for e in p.endpoint.record if e["dir"] == "rx"]
    assert [e["fields"].get("error") for e in rx] == [None, None]


def test_a_gap_holds_the_rest_of_a_frame_back_and_the_frame_still_reads_whole() -> None:
    active = [
        {"step": "send", "frame": "mpa_request", "segments": [8], "gap": 0.4},
        expect("mpa_reply"),
    ]
    passive = [expect("mpa_request", rev=2), {"step": "send", "frame": "mpa_reply"}]
    started = time.monotonic()
    a, p = both(active, passive)
    assert time.monotonic() - started >= 0.4
    (request,) = [e for e in p.endpoint.record if e["dir"] == "rx"]
    assert "error" not in request["fields"]
    assert a.endpoint.record[0]["raw"] == request["raw"]


def test_a_truncated_request_is_what_the_dut_gets_before_the_close() -> None:
    active: Steps = [
        {"step": "send", "frame": "mpa_request", "truncate": 10},
        {"step": "send", "frame": "fin"},
    ]
    passive = [expect("mpa_request"), expect("fin"), {"step": "send", "frame": "fin"}]
    a, p = both(active, passive)
    assert a.endpoint.record[0]["raw"] == b"MPA ID Req".hex()
    assert a.endpoint.record[0]["fields"]["truncate"] == 10
    got = p.endpoint.record[0]["fields"]
    assert got["error"] == "cut short by the close: mpa_request: 10 bytes, 20 needed"


def test_the_first_unmet_expectation_ends_the_run_and_says_why() -> None:
    server = Endpoint("passive", "127.0.0.1", 0)
    port = int(server.local.rsplit(":", 1)[1])
    client = Interpreter(
        Endpoint("active", "127.0.0.1", port),
        [{"step": "send", "frame": "mpa_request", "key": b"MPA ID Bad Frame".hex()}],
    )
    quick = {"step": "expect", "frame": "fpdu", "within": 0.3}
    peer = Interpreter(server, [expect("mpa_request", rev=2), quick])
    assert client.run(time.monotonic() + 5)["error"] is None
    got = peer.run(time.monotonic() + 5)
    unmet = got["unmet"]
    assert unmet["step"] == 1 and unmet["got"] is None and unmet["why"] == "no fpdu in time"
    assert "key" in peer.endpoint.record[0]["fields"]["error"]  # recorded, decoded anyway
    client.endpoint.close()
    server.close()


def test_a_scenario_runs_in_segments_between_dut_steps() -> None:
    server = Endpoint("passive", "127.0.0.1", 0)
    port = int(server.local.rsplit(":", 1)[1])
    peer = Interpreter(server, [{"step": "dut", "action": "connect"}, expect("mpa_request")])
    assert peer.run(time.monotonic() + 5) == {"stopped_at": 0, "unmet": None, "error": None}
    dut = Interpreter(Endpoint("active", "127.0.0.1", port), [send(frame="mpa_request")])
    assert dut.run(time.monotonic() + 5)["error"] is None
    assert peer.run(time.monotonic() + 5) == {"stopped_at": None, "unmet": None, "error": None}
    assert peer.done
    dut.endpoint.close()
    server.close()


def test_a_step_that_cannot_run_is_an_error_naming_it() -> None:
    server = Endpoint("passive", "127.0.0.1", 0)
    peer = Interpreter(server, [send(opcode="send", payload="xyz")])
    got = peer.run(time.monotonic() + 0.3)
    assert got["error"].startswith("step 0: passive: no connection in time")
    server.close()
