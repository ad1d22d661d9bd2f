"""The peer's codecs: FPDU framing, DDP and RDMAP, round trips, overrides and malformed
input (hil/agent/protocol/fpdu.py, ddp.py, rdmap.py; the MPA frames' own:
tests/agent/test_protocol_mpa.py)."""

from __future__ import annotations

import random
import struct

import pytest

from hil.agent.protocol import fpdu, mpa, rdmap
from hil.agent.protocol.crc32c import crc32c
from hil.agent.protocol.frames import FrameError


def test_overrides_that_cannot_be_encoded_are_refused_by_name() -> None:
    with pytest.raises(FrameError, match="ird: 16384 does not fit in 14 bits"):
        mpa.encode("mpa_request", {"ird": 0x4000})
    with pytest.raises(FrameError, match="key: 'zz' is not hex"):
        mpa.encode("mpa_request", {"key": "zz"})
    with pytest.raises(FrameError, match="opcode: 'jump'"):
        fpdu.encode({"opcode": "jump"}, True, 1)
    with pytest.raises(FrameError, match="markers: the peer never inserts"):
        fpdu.encode({"markers": True}, True, 1)
    with pytest.raises(FrameError, match="rtr"):
        mpa.encode("mpa_request", {"rtr": "atomic"})


@pytest.mark.parametrize("crc_on", [True, False])
def test_a_send_round_trips_untagged_with_pad_and_crc(crc_on: bool) -> None:
    data = fpdu.encode({"opcode": "send", "payload": "68656c6c6f"}, crc_on, 7)
    # RFC 5044 4.1: 2 + 18 + 5 = 25 bytes, padded to 28, then the CRC field, there even
    # when CRC is off (0 then, as siw sends it).
    assert len(data) == 28 + 4
    got = fpdu.decode(data, crc_on)
    assert {k: got[k] for k in ("opcode", "t", "l", "dv", "rv", "qn", "msn", "mo", "payload")} == {
        "opcode": "send",
        "t": 0,
        "l": 1,
        "dv": 1,
        "rv": 1,
        "qn": 0,
        "msn": 7,
        "mo": 0,
        "payload": "68656c6c6f",
    }
    assert (got["ulpdu_length"], got["pad"]) == (23, 3)
    assert got.get("crc_ok", True) and "error" not in got
    assert got["crc"] == (crc32c(data[:-4]) if crc_on else 0)


def test_without_crc_the_field_is_read_but_not_checked() -> None:
    data = fpdu.encode({"opcode": "send", "crc": 0x01020304}, False, 1)
    got = fpdu.decode(data, False)
    assert got["crc"] == 0x01020304 and "crc_ok" not in got and "error" not in got


def test_a_write_and_a_read_response_are_tagged() -> None:
    for op in ("write", "read_response"):
        got = fpdu.decode(fpdu.encode({"opcode": op, "stag": 0x1234, "to": 2**40}, True, 1), True)
        assert (got["opcode"], got["t"], got["stag"], got["to"]) == (op, 1, 0x1234, 2**40)


def test_a_read_request_carries_its_sink_and_source() -> None:
    sent = {"sink_stag": 1, "sink_to": 2, "size": 3, "source_stag": 4, "source_to": 5}
    got = fpdu.decode(fpdu.encode({"opcode": "read_request", **sent}, True, 1), True)
    assert got["qn"] == 1 and {k: got[k] for k in sent} == sent  # RFC 5040 5.1: QN 1


def test_a_terminate_carries_its_code_and_the_terminated_headers() -> None:
    ddp_header = fpdu.encode({"opcode": "write", "stag": 9}, False, 1)[2:16].hex()
    sent = {
        "opcode": "terminate",
        "layer": 1,
        "etype": 1,
        "ecode": 0,
        "hdrct_d": 1,
        "ddp_seg_len": 20,
        "ddp_header": ddp_header,
    }
    got = fpdu.decode(fpdu.encode(sent, True, 1), True)
    assert got["qn"] == 2  # RFC 5040 5.1
    assert {k: got[k] for k in sent} == sent
    assert (got["hdrct_m"], got["hdrct_r"], got["payload"]) == (0, 0, "")


def test_field_overrides_reach_the_wire() -> None:
    data = fpdu.encode({"opcode": 9, "ulpdu_length": 999, "crc": "bad", "dv": 2}, True, 1)
    assert struct.unpack_from("!H", data)[0] == 999
    got = fpdu.decode(data, True)
    assert "FPDU: " in got["error"]  # 999 declared, far fewer there
    whole = fpdu.encode({"opcode": 9, "crc": "bad", "dv": 2, "qn": 5}, True, 1)
    got = fpdu.decode(whole, True)
    assert got["opcode"] == 9 and got["qn"] == 5 and got["crc_ok"] is False
    for part in ("opcode 9", "DDP version 2", "CRC does not match"):
        assert part in got["error"]
    assert len(fpdu.encode({"crc": "none"}, True, 1)) == 20  # left out though negotiated
    assert fpdu.encode({"crc": 0x01020304}, True, 1)[-4:] == bytes((4, 3, 2, 1))


def test_a_tagged_opcode_in_an_untagged_segment_is_named() -> None:
    got = fpdu.decode(fpdu.encode({"opcode": "write", "t": 0}, True, 1), True)
    assert "write in an untagged DDP segment" in got["error"]


def test_decoders_never_raise_on_malformed_input() -> None:
    rng = random.Random(26)
    for _ in range(2000):
        data = bytes(rng.randrange(256) for _ in range(rng.randrange(60)))
        for crc_on in (True, False):
            got = fpdu.decode(data, crc_on)
            assert isinstance(got, dict)
        for kind in mpa.KEYS:
            assert isinstance(mpa.decode(kind, data), dict)
        assert isinstance(rdmap.decode(data), dict)
    assert "error" in fpdu.decode(b"", True) and "error" in mpa.decode("mpa_reply", b"MPA")
