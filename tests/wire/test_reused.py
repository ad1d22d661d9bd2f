"""hil.wire.reused: a later connection on a 4-tuple is decoded on its own, with tshark.

The capture is tests/data/wire/close-siw.pcap (one siw connection: MPA request and
reply, orderly close) followed by itself 2 s later with every sequence number moved
by 2**24: the second connection on the same 4-tuple, with a new ISN, as a kernel
that gives a later connect the same source port makes it.  tshark 4.0 decodes the
second one's MPA request and reply as malformed FPDUs unless it is read alone.
"""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from hil.wire import reused, tshark
from hil.wire.decode import decode
from hil.wire.model import Endpoint, Packet
from hil.wire.pcapwindow import HEADER, RECORD, byte_order

DATA = Path(__file__).resolve().parents[1] / "data" / "wire"
_ETHERNET = 14
_IPV4, _IPV6 = 0x0800, 0x86DD
_SHIFT = 1 << 24


def _moved(frame: bytes) -> bytes:
    """An Ethernet frame with its TCP sequence and acknowledgement numbers moved by _SHIFT
    (tshark does not check sums unless asked; hil asks only to find corrupted segments,
    and leaves out those of a sender whose others are good: these all move together)."""
    kind = struct.unpack_from(">H", frame, 12)[0]
    if kind not in (_IPV4, _IPV6):
        return frame
    ip = _ETHERNET
    tcp = ip + ((frame[ip] & 0x0F) * 4 if kind == _IPV4 else 40)
    seq, ack = struct.unpack_from(">II", frame, tcp + 4)
    out = bytearray(frame)
    struct.pack_into(
        ">II", out, tcp + 4, (seq + _SHIFT) % 2**32, (ack + _SHIFT) % 2**32 if ack else 0
    )
    return bytes(out)


def _twice(src: Path, out: Path) -> Path:
    data = src.read_bytes()
    order = byte_order(data[:HEADER])
    records, at = [], HEADER
    while at + RECORD <= len(data):
        sec, frac, caplen, length = struct.unpack_from(f"{order}IIII", data, at)
        records.append((sec, frac, length, data[at + RECORD : at + RECORD + caplen]))
        at += RECORD + caplen
    later = records[-1][0] - records[0][0] + 2
    body = b"".join(
        struct.pack(f"{order}IIII", sec + dt, frac, len(f), length) + f
        for dt, move in ((0, False), (later, True))
        for sec, frac, length, frame in records
        for f in [_moved(frame) if move else frame]
    )
    out.write_bytes(data[:HEADER] + body)
    return out


@pytest.fixture(scope="module")
def twice(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _twice(DATA / "close-siw.pcap", tmp_path_factory.mktemp("reuse") / "twice.pcap")


def test_tshark_alone_loses_the_second_connections_mpa_exchange(twice: Path) -> None:
    """The premise: read as one file, only the first connection has an MPA request."""
    read = tshark.read(twice, timeout=60)
    requests = [f for f in read.packets if "iwarp_mpa.req" in f]
    assert len(requests) == 1


def test_each_connection_on_the_reused_4_tuple_has_its_mpa_exchange(twice: Path) -> None:
    ex = decode({"hA": twice})
    assert len(ex.connections) == 2
    assert ex.connections[0].name == ex.connections[1].name
    for conn in ex.connections:
        assert conn.mpa("request") is not None, conn.name
        assert conn.mpa("reply") is not None, conn.name
    first, second = (c.mpa("request") for c in ex.connections)
    assert first is not None and second is not None
    assert second.frame > max(p.frame for p in ex.connections[0].packets)


def test_only_the_later_connection_is_read_again(twice: Path) -> None:
    ex = decode({"hA": twice})
    seen = [("hA", 0, p) for c in ex.connections for p in c.packets]
    assert reused.later(seen) == [sorted(p.frame for p in ex.connections[1].packets)]


def test_frames_become_a_short_display_filter_set() -> None:
    assert tshark.frame_set([9, 1, 2, 3, 7, 10, 3]) == "1..3,7,9..10"


def _opened_and_closed(first: int, src: Endpoint, dst: Endpoint, isn: int) -> list[Packet]:
    flags = ["SYN", "SYN,ACK", "ACK", "FIN,ACK", "FIN,ACK", "ACK"]
    senders = [src, dst, src, src, dst, src]
    return [
        Packet(
            first + i,
            "hA",
            (first + i) * 1000,
            s,
            dst if s == src else src,
            frozenset(f.split(",")),
            isn + i,
        )
        for i, (f, s) in enumerate(zip(flags, senders, strict=True))
    ]


def test_the_nth_connections_of_every_4_tuple_are_read_together() -> None:
    """Two 4-tuples used again once and one of them twice: two more reads, not three."""
    a, b, p = ("198.18.0.1", 40000), ("198.18.0.1", 40001), ("198.18.0.2", 7174)
    conns = [
        _opened_and_closed(1, a, p, 100),
        _opened_and_closed(11, b, p, 200),
        _opened_and_closed(21, a, p, 300),  # a's second
        _opened_and_closed(31, b, p, 400),  # b's second
        _opened_and_closed(41, a, p, 500),  # a's third
    ]
    frames = [[q.frame for q in c] for c in conns]
    seen = [("hA", 0 if a in (q.src, q.dst) else 1, q) for c in conns for q in c]
    assert reused.later(seen) == [sorted(frames[2] + frames[3]), frames[4]]
