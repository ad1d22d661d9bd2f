"""The wire rule ``segments-within-the-clamped-mss``: an MSS clamp took, and held.

A middlebox clamping the MSS (an impairment of kind ``mss``, :mod:`hil.host.impair`)
rewrites the MSS option of the SYN the receiver sends; the timeline records it as the
sender's action ``mss_clamp`` (params ``mss``).  On each of that timeline's
connections the wire must show, at the sender's own capture point:

- the receiver's SYN arrived with an MSS option no larger than the clamp, while the
  receiver's own point shows it sent a larger one (so the path rewrote it, not the
  receiver's stack: else the clamp changed nothing, "impairment not effective");
- no data segment the sender sent is longer than that MSS (RFC 9293 section 3.7.1:
  a sender must not send a segment larger than the MSS the receiver announced);
- the sender sent more than one MSS of data, so the clamp was exercised.

The sender's own point is the one that sees its segments as they went out: tcpdump
taps a host's sent frame after software GSO has cut it (``validate_xmit_skb`` before
``xmit_one``'s ``dev_queue_xmit_nit``, net/core/dev.c, Linux 6.1; the lab's virtio
NICs offer no TSO), but taps a received frame after GRO merged it
(``__netif_receive_skb_core``), so the receiver's point may show longer ones.
"""

from __future__ import annotations

from hil.judge.timeline import MSS_CLAMP, SIDES, Action
from hil.wire.link import Link
from hil.wire.model import Packet
from hil.wire.rule import (
    NOT_EFFECTIVE,
    Outcome,
    WireCase,
    WireFinding,
    evidence,
    judged_by_action,
    missing,
)


def clamped_mss(case: WireCase) -> Outcome:
    """Each connection of a timeline with an ``mss_clamp`` shows the clamp on the wire."""
    return judged_by_action(case, MSS_CLAMP, _clamp_findings, "no MSS clamp in this test")


def _clamp_findings(lk: Link, clamp: Action) -> list[WireFinding]:
    if lk.wire is None:
        return [missing(lk, "connection not on the wire")]
    mss = int(clamp.params["mss"])
    sender = lk.timeline.pair[SIDES.index(clamp.side)]
    receiver = lk.timeline.pair[1 - SIDES.index(clamp.side)]
    me = lk.wire.active if clamp.side == lk.active_side else lk.wire.passive
    syns = [p for p in lk.wire.packets if "SYN" in p.flags and p.src != me]
    arrived = [p for p in syns if p.point == sender]
    if not arrived:
        return [missing(lk, f"the receiver's SYN not captured at {sender}")]
    seen = min(p.mss if p.mss is not None else mss + 1 for p in arrived)
    if seen > mss:
        what = f"the receiver's SYN reached {sender} with MSS {seen}, above the clamp's {mss}"
        return [_finding(lk, what, arrived)]
    sent = [p for p in syns if p.point == receiver and p.mss is not None]
    if sent and max(p.mss or 0 for p in sent) <= mss:
        what = f"{receiver} announced MSS {sent[0].mss} itself, not above the clamp's {mss}"
        return [_finding(lk, f"{what}: the path changed nothing", sent)]
    data = [p for p in lk.wire.packets if p.point == sender and p.src == me and p.length]
    longer = [p for p in data if p.length > seen]
    if longer:
        return [
            WireFinding(
                f"{len(longer)} segments from {sender} longer than the {seen}-byte MSS its "
                "peer's SYN announced (RFC 9293 section 3.7.1)",
                lk.wire.name,
                evidence(*longer[:3]),
            )
        ]
    total = sum(p.length for p in data if not p.retransmission)
    if total <= seen:
        what = f"{sender} sent {total} bytes, no more than one {seen}-byte segment"
        return [_finding(lk, f"{what}: the clamp was not exercised", data)]
    return []


def _finding(lk: Link, what: str, packets: list[Packet]) -> WireFinding:
    assert lk.wire is not None
    return WireFinding(f"{NOT_EFFECTIVE}: {what}", lk.wire.name, evidence(*packets[:3]))
