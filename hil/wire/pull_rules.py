"""The wire rule of a link pull under traffic: retransmissions, silence, a new 4-tuple."""

from __future__ import annotations

from hil.judge.timeline import Action
from hil.wire.link import Link
from hil.wire.model import Packet
from hil.wire.rule import Outcome, WireCase, WireFinding, evidence, judged, missing


def link_pull(case: WireCase) -> Outcome:
    findings, count = [], 0
    for tl in case.timelines:
        pull = next((a for a in tl.actions if a.name == "pull" and a.params.get("traffic")), None)
        if pull is None:
            continue
        restore = next((a for a in tl.actions if a.name == "restore" and a.t_us > pull.t_us), None)
        olds = [lk for lk in case.links if lk.timeline is tl and lk.connect.t_us < pull.t_us]
        news = [lk for lk in case.links if lk.timeline is tl and lk.connect.t_us > pull.t_us]
        for lk in olds:
            count += 1
            findings += _pull_findings(lk, pull, restore)
        old_wires = {id(lk.wire) for lk in olds if lk.wire}
        findings += [
            WireFinding("the reconnect reused the pulled connection's 4-tuple", lk.wire.name)
            for lk in news
            if lk.wire is not None and id(lk.wire) in old_wires
        ]
    return judged(findings, count, "no link pull under traffic in this test")


def _data_after(packets: list[Packet], t_us: int) -> list[Packet]:
    """Segments carrying new data (not retransmitted, not a RST) after ``t_us``."""
    return [
        p
        for p in packets
        if p.t_us is not None and p.t_us > t_us and p.length and not p.retransmission
        if "RST" not in p.flags
    ]


def _pull_findings(lk: Link, pull: Action, restore: Action | None) -> list[WireFinding]:
    """What a pull under traffic (the active side writes) must leave on the wire.

    A carrier pull (the host does not see it): when the writer is the other
    host, its retransmissions on the old 4-tuple, then silence or a RST; when
    the writer is the pulled host, nothing it sent after the pull returned
    reaches the peer until the link is back (a segment already in flight may:
    :func:`_in_flight`).  A pulled host's own capture stops seeing what it
    sends once the kernel acts on the carrier loss: linkwatch, not urgent for a
    carrier off (link_watch.c linkwatch_urgent_event, 6.1: up to a second
    later), runs dev_deactivate_many, which puts noop_qdisc in place and frees
    the skbs the qdisc still held (sch_generic.c:1353-1373) before they reach
    dev_queue_xmit_nit's taps; so its retransmissions cannot be shown.  An
    admin pull is seen by the host:
    siw ends its QPs at once, and the bytes its socket still held go out when
    the link is back, so only the reconnect's new 4-tuple is judged.
    """
    if lk.wire is None:
        return [missing(lk, "connection not on the wire")]
    after = [p for p in lk.wire.packets if p.t_us is not None and p.t_us >= pull.t_us]
    found = []
    if pull.params.get("mode") == "carrier":
        if pull.side == lk.active_side:
            found += _pulled_writer(lk, after, pull, restore)
        else:
            found += _retransmitted(lk, after, pull)
    return found


def _retransmitted(lk: Link, after: list[Packet], pull: Action) -> list[WireFinding]:
    assert lk.wire is not None
    retrans = [p for p in after if p.retransmission]
    if not retrans:
        return [
            WireFinding(
                f"{pull.brief()}: no retransmission on the pulled connection after the pull",
                lk.wire.name,
            )
        ]
    fresh = _data_after(after, max(p.t_us or 0 for p in retrans))
    if fresh:
        return [
            WireFinding(
                "new data on the pulled connection after its retransmissions "
                "(expected nothing, or an RST)",
                lk.wire.name,
                evidence(*fresh[:3]),
            )
        ]
    return []


def _in_flight(packets: tuple[Packet, ...], arrived: Packet, writer: str, returned_us: int) -> bool:
    """Whether ``arrived`` (a segment the peer captured) was already on its way when the
    pull returned: the pulled host's own capture saw it leave by ``returned_us``.

    Once QEMU's ``set_link`` (the lab's carrier pull) has returned, the NIC's and
    its backend's ``link_down`` are set and ``qemu_deliver_packet_iov`` drops
    every frame the guest hands over (QEMU net/net.c): nothing sent later leaves
    the host.  A frame handed over before it may still sit in the UDP socket
    between the two QEMUs, or in the peer guest's receive queue, and the peer's
    capture stamps it when its kernel takes it in: measured on the lab, 5.8 ms
    after the pull returned (issue 25).  The pulled host's capture stamps the
    same segment (same 4-tuple direction, raw sequence number and length) when
    its kernel hands it to the NIC, so its earliest copy says when it was sent.
    A segment its capture never saw cannot be shown in flight.
    """
    sent = [
        p.t_us
        for p in packets
        if p.point == writer
        and p.t_us is not None
        and (p.src, p.dst, p.seq, p.length)
        == (arrived.src, arrived.dst, arrived.seq, arrived.length)
    ]
    return bool(sent) and min(sent) <= returned_us


def _pulled_writer(
    lk: Link, after: list[Packet], pull: Action, restore: Action | None
) -> list[WireFinding]:
    assert lk.wire is not None
    writer = lk.timeline.pair[0 if lk.active_side == "a" else 1]
    until = restore.t_us if restore is not None else None
    returned = pull.end_us + lk.timeline.uncertainty_us(*lk.timeline.pair)
    arrived = [
        p
        for p in after
        if p.point != writer
        and p.src == lk.wire.active
        and p.length
        and (until is None or (p.t_us or 0) < until)
        and (p.t_us or 0) > returned
        and not _in_flight(lk.wire.packets, p, writer, returned)
    ]
    if arrived:
        return [
            WireFinding(
                f"{pull.brief()}: data from the pulled host reached its peer while the link "
                f"was pulled",
                lk.wire.name,
                evidence(*arrived[:3]),
            )
        ]
    return []
