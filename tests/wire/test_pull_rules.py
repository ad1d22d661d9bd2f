"""link-pull-on-the-wire on hand-made two-point captures: a segment the pulled writer
sent before its carrier pull returned may reach the peer after it (in flight); one sent
after it may not."""

from __future__ import annotations

from hil.judge.profiles import SIW
from hil.judge.timeline import Action, ClockOffset, Timeline
from hil.wire.link import Link
from hil.wire.model import Connection, Exchange, Packet
from hil.wire.pull_rules import link_pull
from hil.wire.rule import Outcome, WireCase

A, B = ("198.18.0.1", 40000), ("198.18.0.2", 7174)
HOSTS = ("lab-a", "lab-b")
UNCERTAINTY_US = 300  # each host's clock against the controller's
PULL_US, PULL_TOOK_US, RESTORE_US = 1_000_000, 20_000, 6_000_000  # the pull returned at 1.02 s


def seg(point: str, t_us: int, seq: int, length: int = 1448, retrans: bool = False) -> Packet:
    """A data segment from the active (pulled, writing) side a, as ``point`` captured it."""
    return Packet(0, point, t_us, A, B, frozenset({"ACK", "PSH"}), seq, length, retrans, t_us=t_us)


def outcome(*packets: Packet) -> Outcome:
    connect = Action(10_000, "a", "connect", "a:1")
    pull = Action(
        PULL_US, "a", "pull", None, {"mode": "carrier", "traffic": True}, "ok", PULL_TOOK_US
    )
    restore = Action(RESTORE_US, "a", "restore", None, {"mode": "carrier"})
    offsets = tuple(ClockOffset(h, 0, UNCERTAINTY_US) for h in HOSTS)
    tl = Timeline("link-pull-carrier-traffic", "siw", HOSTS, (connect, pull, restore), (), offsets)
    wire = Connection(A, B, packets)
    placed = {h: UNCERTAINTY_US for h in HOSTS}
    lk = Link(tl, connect, "c1", wire, "4-tuple")
    return link_pull(WireCase(Exchange((wire,), HOSTS, placed), (tl,), (lk,), SIW))


def test_a_segment_sent_before_the_pull_returned_may_arrive_after_it() -> None:
    # Seen leaving lab-a 1 ms before the pull returned, taken in by lab-b 5.8 ms after it:
    # the case of issue 25 (the UDP socket between the QEMUs, the peer's receive queue).
    sent, arrived = PULL_US + PULL_TOOK_US - 1_000, PULL_US + PULL_TOOK_US + 5_800
    got = outcome(seg("lab-a", sent, 5000), seg("lab-b", arrived, 5000))
    assert got.status == "pass", got


def test_a_segment_sent_after_the_pull_returned_must_not_arrive() -> None:
    sent, arrived = PULL_US + PULL_TOOK_US + 2_000, PULL_US + PULL_TOOK_US + 5_800
    got = outcome(seg("lab-a", sent, 5000), seg("lab-b", arrived, 5000))
    assert got.status == "fail"
    (finding,) = got.findings
    assert "data from the pulled host reached its peer while the link was pulled" in (
        finding.to_text()
    )
    assert "#0@lab-b" in finding.to_text()


def test_a_late_arrival_the_writer_never_captured_cannot_be_shown_in_flight() -> None:
    got = outcome(seg("lab-b", PULL_US + PULL_TOOK_US + 5_800, 5000))
    assert got.status == "fail", got


def test_in_flight_is_the_same_segment_not_any_earlier_one() -> None:
    # lab-a sent seq 5000 before the pull; what arrived late is seq 6448 (sent after it),
    # and a retransmission of 6448 after the pull does not make it older.
    before, after = PULL_US + PULL_TOOK_US - 1_000, PULL_US + PULL_TOOK_US + 2_000
    late = seg("lab-b", PULL_US + PULL_TOOK_US + 5_800, 6448)
    got = outcome(seg("lab-a", before, 5000), seg("lab-a", after, 6448, retrans=True), late)
    assert got.status == "fail", got


def test_a_segment_within_the_clock_uncertainty_of_the_return_counts_in_flight() -> None:
    sent = PULL_US + PULL_TOOK_US + UNCERTAINTY_US  # lab-a's and lab-b's offsets: 600 µs
    got = outcome(seg("lab-a", sent, 5000), seg("lab-b", sent + 5_000, 5000))
    assert got.status == "pass", got
