"""The MPA frame codec both ends import (hil/agent/protocol/mpa.py): round trips, the v2
IRD/ORD words, malformed frames and the peer's default reply."""

from __future__ import annotations

import struct

import pytest

from hil.agent.protocol import mpa


def test_an_mpa_v2_request_round_trips_with_its_ird_ord_words() -> None:
    sent = {"ird": 0x3FFF, "ord": 0, "p2p": 1, "rtrs": ["write", "read"], "private_data": "abcd"}
    data = mpa.encode("mpa_request", sent)
    # RFC 5044 7.1: the key, then M C R Res Rev, PD_Length (4 words + 2 bytes).
    assert data[:16] == b"MPA ID Req Frame"
    assert data[16:20] == bytes((0x40 | 0x10, 2, 0, 6))  # C=1, Linux's enhanced bit, Rev 2
    # RFC 6581 5.1: P2P in the IRD word's top bit; WRITE and READ RTR in the ORD word's.
    assert data[20:24] == struct.pack("!HH", 0x8000 | 0x3FFF, 0x8000 | 0x4000)
    got = mpa.decode("mpa_request", data)
    assert got == {
        "key": b"MPA ID Req Frame".hex(),
        "m": 0,
        "c": 1,
        "r": 0,
        "res": 0x10,
        "rev": 2,
        "pd_length": 6,
        "v2": True,
        "ird": 0x3FFF,
        "ord": 0,
        "p2p": 1,
        "rtr": "write",
        "rtrs": ["write", "read"],
        "private_data": "abcd",
    }


def test_a_v1_reply_has_no_words_and_keeps_its_private_data_whole() -> None:
    data = mpa.encode("mpa_reply", {"rev": 1, "c": 0, "r": 1, "private_data": "0102"})
    got = mpa.decode("mpa_reply", data)
    assert (got["rev"], got["c"], got["r"], got["res"], got["private_data"]) == (1, 0, 1, 0, "0102")
    assert "ird" not in got and "error" not in got


@pytest.mark.parametrize(
    ("override", "error"),
    [
        ({"key": b"MPA ID Bad Frame".hex()}, "key"),
        ({"rev": 3}, "Rev 3"),
        ({"pd_length": 600, "rev": 1}, "PD_Length 600 over 512"),
        ({"v2": False}, "Rev 2 without the IRD/ORD words"),
    ],
)
def test_a_bad_mpa_request_decodes_with_an_error(override: dict[str, object], error: str) -> None:
    got = mpa.decode("mpa_request", mpa.encode("mpa_request", override))
    assert error in got["error"]


def test_a_reply_refuses_markers_with_a_reject() -> None:
    asked = mpa.decode("mpa_request", mpa.encode("mpa_request", {"m": 1, "ird": 2, "ord": 7}))
    answer = mpa.reply_defaults(asked)
    # RFC 5044 7.1: M=1 obliges the other end to send markers, which the peer never does.
    assert (answer["m"], answer["r"]) == (0, 1)
    assert (answer["ird"], answer["ord"]) == (7, 2)  # RFC 6581: IRD answers the ORD
