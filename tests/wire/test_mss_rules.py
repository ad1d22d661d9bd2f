"""segments-within-the-clamped-mss on hand-made two-point captures: the clamp shown by the
SYN-ACK's MSS at each end and the sender's segments, or "impairment not effective"."""

from __future__ import annotations

from hil.judge.profiles import SIW
from hil.judge.timeline import MSS_CLAMP, Action, ClockOffset, Timeline
from hil.wire.link import Link
from hil.wire.model import Connection, Exchange, Packet
from hil.wire.mss_rules import clamped_mss
from hil.wire.rule import Outcome, WireCase

A, B = ("198.18.0.1", 40000), ("198.18.0.2", 7174)
HOSTS = ("lab-a", "lab-b")
CLAMP = 536


def syn_ack(point: str, mss: int | None) -> Packet:
    """The passive side b's SYN-ACK as ``point`` captured it."""
    return Packet(1, point, 100, B, A, frozenset({"SYN", "ACK"}), 0, 0, mss=mss)


def seg(length: int, point: str = "lab-a") -> Packet:
    """A data segment from the active side a (the clamped sender)."""
    return Packet(2, point, 200, A, B, frozenset({"ACK", "PSH"}), 1, length)


def outcome(*packets: Packet, clamp: bool = True) -> Outcome:
    connect = Action(10, "a", "connect", "a:1")
    actions = (connect, Action(5, "a", MSS_CLAMP, None, {"mss": CLAMP})) if clamp else (connect,)
    offsets = tuple(ClockOffset(h, 0, 300) for h in HOSTS)
    tl = Timeline("connect", "siw", HOSTS, actions, (), offsets)
    wire = Connection(A, B, packets)
    lk = Link(tl, connect, "c1", wire, "4-tuple")
    return clamped_mss(WireCase(Exchange((wire,), HOSTS, {}), (tl,), (lk,), SIW))


def test_a_clamped_syn_and_segments_within_it_pass() -> None:
    got = outcome(syn_ack("lab-b", 1460), syn_ack("lab-a", CLAMP), seg(524), seg(524), seg(100))
    assert got.status == "pass", got


def test_a_syn_that_arrived_unclamped_is_not_effective() -> None:
    got = outcome(syn_ack("lab-b", 1460), syn_ack("lab-a", 1460), seg(1448), seg(1448))
    assert got.status == "fail"
    assert "impairment not effective: the receiver's SYN reached lab-a with MSS 1460" in (
        got.findings[0].message
    )


def test_a_receiver_that_announced_the_clamp_itself_is_not_effective() -> None:
    got = outcome(syn_ack("lab-b", 500), syn_ack("lab-a", 500), seg(488), seg(488))
    assert got.status == "fail"
    assert "lab-b announced MSS 500 itself" in got.findings[0].message


def test_a_segment_longer_than_the_clamped_mss_fails() -> None:
    got = outcome(syn_ack("lab-b", 1460), syn_ack("lab-a", CLAMP), seg(524), seg(1448))
    assert got.status == "fail"
    assert "1 segments from lab-a longer than the 536-byte MSS" in got.findings[0].message


def test_data_within_one_segment_did_not_exercise_the_clamp() -> None:
    got = outcome(syn_ack("lab-b", 1460), syn_ack("lab-a", CLAMP), seg(100))
    assert got.status == "fail"
    assert "the clamp was not exercised" in got.findings[0].message


def test_the_receivers_segments_merged_by_its_gro_are_not_judged() -> None:
    got = outcome(
        syn_ack("lab-b", 1460), syn_ack("lab-a", CLAMP), seg(524), seg(524), seg(1048, "lab-b")
    )
    assert got.status == "pass", got


def test_a_syn_not_captured_at_the_sender_is_a_finding() -> None:
    got = outcome(syn_ack("lab-b", 1460), seg(524))
    assert got.status == "fail"
    assert "the receiver's SYN not captured at lab-a" in got.findings[0].message


def test_no_clamp_is_not_applicable() -> None:
    assert outcome(syn_ack("lab-a", 1460), seg(1448), clamp=False).status == "n/a"
