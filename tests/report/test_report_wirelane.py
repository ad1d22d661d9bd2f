"""The wire lane's content: which packets cross which way, what is left out and said so."""

from __future__ import annotations

from dataclasses import replace

import wireexchanges as wx

from hil.report.wirelane import MAX_ARROWS, wire_lane
from hil.wire.model import Connection, Exchange


def test_the_packets_that_matter_cross_from_sender_to_receiver() -> None:
    lane = wire_lane(wx.timeline(), wx.closed())
    got = [(c.sender, c.label, c.tone) for c in lane.crossings]
    assert got == [
        ("a", "SYN", "tcp"),
        ("b", "SYN-ACK", "tcp"),
        ("a", "MPA request", "mpa"),
        ("b", "MPA reply", "mpa"),
        ("a", "FIN", "tcp"),
        ("b", "FIN", "tcp"),
    ]
    syn = lane.crossings[0]
    # Left when A's capture saw it, arrived when B's did.
    assert (syn.depart_us, syn.arrive_us) == (1200, 1300)
    assert "#1@lab-a" in syn.tooltip and "#1@lab-b" in syn.tooltip
    assert "1 Send" in lane.summary and "2 ACK" in lane.summary
    assert "wire lab-a: packets placed ± 0.120 ms" in lane.notes
    assert "wire lab-b: packets placed ± 0.250 ms" in lane.notes


def test_sides_come_from_the_connect_target_when_b_connects() -> None:
    # B connects to a listener on A: the connect is on side b and names A's address.
    tl = wx.timeline()
    actions = tuple(
        replace(a, side="b", params={"dst": wx.A[0], "port": 7174}) if a.name == "connect" else a
        for a in tl.actions
    )
    b_active, a_passive = ("198.18.0.2", 40000), ("198.18.0.1", 7174)
    pkts = wx.closed_packets(a=b_active, b=a_passive)
    conn = Connection(active=b_active, passive=a_passive, packets=tuple(pkts))
    placed = Exchange((conn,), ("lab-a", "lab-b"), {"lab-a": 1, "lab-b": 1})
    lane = wire_lane(replace(tl, actions=actions), placed)
    senders = {c.label: c.sender for c in lane.crossings}
    assert senders["SYN"] == "b" and senders["SYN-ACK"] == "a"
    syn = lane.crossings[0]
    # B's capture saw it leave, A's arrive.
    assert (syn.depart_us, syn.arrive_us) == (1200, 1300)


def test_unplaced_packets_are_left_out_and_counted() -> None:
    lane = wire_lane(wx.timeline(), wx.closed(placed=False))
    assert lane.crossings == () and lane.marks == ()
    assert "wire: 18 packets without a timeline time left out" in lane.notes
    assert "wire lab-a: not placed on the timeline (no clock samples)" in lane.notes


def test_red_packets_retransmissions_and_cited_packets() -> None:
    ex = wx.aborted()
    term = next(p for c in ex.connections for p in c.packets if p.terminate is not None)
    lane = wire_lane(wx.timeline(), ex, frozenset({term.brief()}))
    by_label = {c.label: c for c in lane.crossings}
    assert by_label["TERMINATE DDP"].tone == "bad" and by_label["TERMINATE DDP"].cited
    assert by_label["RST"].tone == "bad" and not by_label["RST"].cited
    (mark,) = lane.marks  # the retransmitted Send: a mark on A's edge
    assert mark.sender == "a" and mark.t_us == 60_000


def test_a_connection_of_unknown_addresses_is_left_out_and_counted() -> None:
    stranger = Connection(
        ("203.0.113.1", 1), ("203.0.113.2", 2), wx.closed().connections[0].packets
    )
    ex = replace(wx.closed(), connections=(*wx.closed().connections, stranger))
    lane = wire_lane(wx.timeline(), ex)
    assert len(lane.crossings) == 6
    assert "wire: 1 connections between addresses of no known side left out" in lane.notes


def test_a_storm_is_cut_to_the_arrow_budget_keeping_red_and_whole_connections() -> None:
    conns = []
    for i in range(300):
        a = (wx.A[0], 40000 + i)
        pkts = wx.closed_packets(a=a, t0=i * 0.01)
        conns.append(Connection(a, wx.B, tuple(pkts)))
    rst = wx.seen(99, (wx.A[0], 40299), wx.B, "RST", 150.0)
    conns[-1] = replace(conns[-1], packets=conns[-1].packets + tuple(rst))
    ex = Exchange(tuple(conns), ("lab-a", "lab-b"), {"lab-a": 100, "lab-b": 100})
    lane = wire_lane(wx.timeline(), ex)
    assert len(lane.crossings) <= MAX_ARROWS
    assert any(c.label == "RST" for c in lane.crossings)
    # Whole connections: as many SYNs as FINs from A among the drawn ones.
    labels = [(c.sender, c.label) for c in lane.crossings]
    assert labels.count(("a", "SYN")) == labels.count(("a", "FIN")) > 10
    (note,) = [n for n in lane.notes if "arrows drawn" in n]
    assert note.startswith(f"wire: {len(lane.crossings)} of 1801 arrows drawn; not drawn: ")
    assert "SYN" in note and "FIN" in note
