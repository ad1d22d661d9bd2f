"""hil.wire.render's ladder: the packets that matter as arrows, on a real capture and by hand."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from hil.wire.decode import decode
from hil.wire.model import Connection, Exchange, Mpa, Packet, Terminate
from hil.wire.render import ladder_text, segments, what_matters

RPING = Path(__file__).resolve().parents[1] / "data" / "wire" / "rping-siw.pcap"
A, P = ("198.18.0.1", 40000), ("198.18.0.2", 7174)


def test_rping_as_a_ladder() -> None:
    lines = ladder_text(decode({"guest1": RPING})).splitlines()
    assert lines[0] == (
        "connection 198.18.0.1:44668 > 198.18.0.2:7174 (guest1: ms since its first packet)"
    )
    got = [ln.split("|")[1].strip("-<> ") for ln in lines[2:] if "|" in ln]
    assert got == ["SYN", "SYN-ACK", "MPA request", "MPA reply", "FIN", "FIN"]
    # The active side's packets point right, the passive side's left.
    assert lines[2].endswith("->|") and lines[3].lstrip().split("  ", 1)[1].startswith("|<")
    assert lines[2].split()[0] == "0.000"
    assert lines[-1].startswith("  also: ") and "Read Request" in lines[-1]


def _pkt(n: int, src: tuple[str, int], flags: str, point: str, t_us: int, **kw: Any) -> Packet:
    return Packet(
        n, point, t_us, src, P if src == A else A, frozenset(flags.split(",")), t_us=t_us, **kw
    )


def test_both_points_times_in_one_row_and_red_packets_named() -> None:
    term = Terminate("DDP", 1, 2)
    pkts = [
        _pkt(1, A, "SYN", "ha", 1000),
        _pkt(1, A, "SYN", "hb", 1100),
        _pkt(2, A, "ACK,PSH", "ha", 5000, seq=1, length=28, terminate=term),
        _pkt(3, P, "RST", "hb", 6000, seq=1),
        _pkt(3, P, "RST", "ha", 6100, seq=1),
    ]
    retrans = replace(_pkt(4, A, "ACK,PSH", "ha", 7000, seq=29, length=8), retransmission=True)
    ex = Exchange((Connection(A, P, (*pkts, retrans)),), ("ha", "hb"), {"ha": 10, "hb": 10})
    lines = ladder_text(ex).splitlines()
    assert lines[0].endswith("(ha: ms on the timeline, hb: ms on the timeline)")
    rows = [ln.split() for ln in lines[2:]]
    assert rows[0][:2] == ["1.000", "1.100"] and "SYN" in rows[0]
    assert rows[1][:2] == ["5.000", "-"] and "TERMINATE" in rows[1]
    assert rows[2][:2] == ["6.100", "6.000"] and "RST" in rows[2]
    assert "(retransmission)" in rows[3]


def test_what_matters_and_segments() -> None:
    reject = Mpa("reply", 2, False, False, True, True, "", "00010001")
    assert what_matters(_pkt(1, P, "ACK,PSH", "ha", 1, mpa=reject)) == ("MPA reject", "bad")
    assert what_matters(_pkt(1, A, "FIN,ACK", "ha", 1)) == ("FIN", "tcp")
    assert what_matters(_pkt(1, A, "ACK", "ha", 1)) is None
    twice = [_pkt(1, A, "SYN", "ha", 1), _pkt(1, A, "SYN", "ha", 2), _pkt(1, A, "SYN", "hb", 3)]
    # A retransmitted SYN: the first of each point is one segment, the second its own.
    assert [len(v) for v in segments(Connection(A, P, tuple(twice)))] == [2, 1]


def test_an_empty_exchange_has_no_ladder() -> None:
    assert ladder_text(Exchange(())) == "no TCP connections\n"
