"""mpa-request-retransmitted on hand-made two-point captures and on siw's rping capture
edited to send its MPA request again: the request the path dropped once seen twice at
the sender (same sequence number and length), or "impairment not effective"."""

from __future__ import annotations

import struct
from pathlib import Path

from hil.judge.profiles import SIW
from hil.judge.timeline import MPA_REQUEST_DROP, Action, ClockOffset, Timeline
from hil.wire.decode import decode
from hil.wire.link import Link
from hil.wire.model import Connection, Exchange, Mpa, Packet
from hil.wire.mpadrop_rules import mpa_request_retransmitted
from hil.wire.rule import Outcome, WireCase

A, B = ("198.18.0.1", 40000), ("198.18.0.2", 7174)
HOSTS = ("lab-a", "lab-b")
REQUEST = Mpa("request", 2, False, False, False, True, "hil-impaired", "")


def request(frame: int, point: str = "lab-a", seq: int = 1, length: int = 48) -> Packet:
    """The active side a's MPA request as ``point`` captured it (decoded: the original)."""
    flags = frozenset({"ACK", "PSH"})
    return Packet(frame, point, 100 * frame, A, B, flags, seq, length, mpa=REQUEST)


def again(frame: int, point: str = "lab-a", seq: int = 1, length: int = 48) -> Packet:
    """A segment of a's as tshark gives a retransmission: marked, its payload undecoded."""
    flags = frozenset({"ACK", "PSH"})
    return Packet(frame, point, 100 * frame, A, B, flags, seq, length, retransmission=True)


def outcome(*packets: Packet, drop: bool = True) -> Outcome:
    return judge(Connection(A, B, packets), drop)


def judge(wire: Connection, drop: bool = True) -> Outcome:
    """The rule on one connection of a connect whose active side a's request was dropped."""
    connect = Action(10, "a", "connect", "a:1")
    actions = (connect, Action(5, "a", MPA_REQUEST_DROP, None, {})) if drop else (connect,)
    offsets = tuple(ClockOffset(h, 0, 300) for h in HOSTS)
    tl = Timeline("connect", "siw", HOSTS, actions, (), offsets)
    lk = Link(tl, connect, "c1", wire, "4-tuple")
    return mpa_request_retransmitted(WireCase(Exchange((wire,), HOSTS, {}), (tl,), (lk,), SIW))


def test_a_request_sent_again_at_its_sequence_number_passes() -> None:
    got = outcome(request(1), request(2, "lab-b"), again(3), again(4, "lab-b"))
    assert got.status == "pass", got


def test_a_request_sent_once_is_not_effective() -> None:
    got = outcome(request(1), request(2, "lab-b"))
    assert got.status == "fail"
    assert got.findings[0].message.startswith(
        "impairment not effective: the MPA request left lab-a once (seq 1, 48 bytes)"
    )


def test_a_later_segment_or_a_copy_seen_only_at_the_receiver_is_no_retransmission() -> None:
    got = outcome(request(1), again(2, seq=49, length=20), again(3, "lab-b"))
    assert got.status == "fail"
    assert "left lab-a once" in got.findings[0].message


def test_a_request_not_captured_at_the_sender_is_a_finding() -> None:
    got = outcome(request(1, "lab-b"), again(2, "lab-b"))
    assert got.status == "fail"
    assert "the MPA request not captured at lab-a" in got.findings[0].message


def test_a_test_without_the_drop_is_not_judged() -> None:
    assert outcome(request(1), drop=False).status == "n/a"


# rping between the lab's siw guests, captured at the client (tests/data/wire/README.md):
# frame 6 is its MPA request, frame 7 the server's ACK of it 41 ms later.
RPING = Path(__file__).resolve().parents[1] / "data" / "wire" / "rping-siw.pcap"
REQUEST_FRAME, RESENT_AFTER_US = 6, 20_000


def _sent_again(path: Path) -> Path:
    """rping-siw.pcap with its MPA request's frame copied 20 ms after it, as TCP resends
    a segment the path dropped (a microsecond little-endian pcap: 24-byte file header,
    16-byte record headers)."""
    data = RPING.read_bytes()
    records, at = [], 24
    while at < len(data):
        sec, usec, incl, orig = struct.unpack_from("<IIII", data, at)
        records.append(data[at : at + 16 + incl])
        at += 16 + incl
    request = records[REQUEST_FRAME - 1]
    sec, usec, incl, orig = struct.unpack_from("<IIII", request)
    when = sec * 1_000_000 + usec + RESENT_AFTER_US
    copy = struct.pack("<IIII", when // 1_000_000, when % 1_000_000, incl, orig) + request[16:]
    records.insert(REQUEST_FRAME, copy)
    path.write_bytes(data[:24] + b"".join(records))
    return path


def test_siws_request_sent_again_in_a_real_capture_passes_and_sent_once_does_not(
    tmp_path: Path,
) -> None:
    """tshark marks the copy a retransmission of the request's sequence number and length."""
    edited = decode({"lab-a": _sent_again(tmp_path / "resent.pcap")}, timeout=60)
    (conn,) = edited.connections
    request = conn.mpa("request")
    copy = next(p for p in conn.packets if p.frame == REQUEST_FRAME + 1)
    assert request is not None and request.frame == REQUEST_FRAME
    assert copy.retransmission and (copy.seq, copy.length) == (request.seq, request.length)
    assert judge(conn).status == "pass"
    (once,) = decode({"lab-a": RPING}, timeout=60).connections
    got = judge(once)
    assert got.status == "fail" and "left lab-a once" in got.findings[0].message
