"""hil.wire.tcpconn: one 4-tuple used by two TCP connections: each new SYN begins one.

The kernel may give a second connect of one test the source port of an earlier,
closed one (two race rounds did, in the lab run of issue 25).  The packets here
are typed by hand as the decoder's input (tshark is the boundary), all in one
``tcp.stream``, as if tshark had kept the two connections in one conversation.
"""

from __future__ import annotations

from hil.wire.model import Endpoint, Packet
from hil.wire.tcpconn import Seen, connections

A: Endpoint = ("198.18.0.1", 40000)
P: Endpoint = ("198.18.0.2", 7174)


def pkt(n: int, src: Endpoint, flags: str, seq: int = 0, point: str = "hA") -> Packet:
    return Packet(
        frame=n,
        point=point,
        wall_us=n * 1000,
        src=src,
        dst=P if src == A else A,
        flags=frozenset(flags.split(",")),
        seq=seq,
    )


def opened_and_closed(first: int, isn: int, end: str = "FIN", point: str = "hA") -> list[Packet]:
    """A connection from A: the handshake (A's ISN ``isn``), then ``end`` (FIN or RST)."""
    closing = [pkt(first + 3, A, f"{end},ACK", isn + 1, point)]
    if end == "FIN":
        closing += [pkt(first + 4, P, "FIN,ACK", 5001, point), pkt(first + 5, A, "ACK", 0, point)]
    return [
        pkt(first, A, "SYN", isn, point),
        pkt(first + 1, P, "SYN,ACK", 5000, point),
        pkt(first + 2, A, "ACK", isn + 1, point),
        *closing,
    ]


def seen(packets: list[Packet], stream: int = 0) -> list[Seen]:
    return [(p.point, stream, p) for p in packets]


def test_a_syn_after_a_fin_begins_a_new_connection() -> None:
    first, second = opened_and_closed(1, 100), opened_and_closed(11, 900)
    conns = connections(seen(first + second))
    assert [c.packets for c in conns] == [tuple(first), tuple(second)]
    assert all(c.active == A and c.passive == P for c in conns)


def test_a_syn_after_a_rst_begins_a_new_connection_even_with_the_same_isn() -> None:
    first, second = opened_and_closed(1, 100, "RST"), opened_and_closed(11, 100)
    conns = connections(seen(first + second))
    assert [c.packets for c in conns] == [tuple(first), tuple(second)]


def test_a_syn_with_a_new_isn_begins_a_new_connection_without_a_close_between() -> None:
    first = opened_and_closed(1, 100)[:3]  # its close fell outside the capture
    second = opened_and_closed(11, 900)
    conns = connections(seen(first + second))
    assert [c.packets for c in conns] == [tuple(first), tuple(second)]


def test_a_syn_after_packets_of_a_connection_whose_syn_was_not_captured_begins_one() -> None:
    tail = opened_and_closed(1, 100)[2:]  # the capture began after the handshake
    second = opened_and_closed(11, 900)
    conns = connections(seen(tail + second))
    assert [c.packets for c in conns] == [tuple(tail), tuple(second)]


def test_a_retransmitted_syn_stays_in_its_connection() -> None:
    packets = opened_and_closed(1, 100)
    packets.insert(1, pkt(20, A, "SYN", 100))  # the same ISN again: a retransmission
    conns = connections(seen(packets))
    assert len(conns) == 1
    assert conns[0].packets == tuple(packets)


def test_both_points_split_alike_and_the_nth_connections_are_one() -> None:
    a_side = opened_and_closed(1, 100) + opened_and_closed(11, 900)
    b_side = opened_and_closed(1, 100, point="hB") + opened_and_closed(11, 900, point="hB")
    conns = connections(seen(a_side) + seen(b_side, stream=7))
    assert [c.points for c in conns] == [("hA", "hB"), ("hA", "hB")]
    syns = [p.seq for p in conns[1].packets if p.flags == {"SYN"}]
    assert syns == [900, 900]
