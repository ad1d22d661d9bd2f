"""The wire rule ``mpa-request-retransmitted``: the MPA request the path dropped once came
again, as a TCP retransmission.

A one-shot drop of the sender's first MPA request (an impairment of kind
``drop-mpa-request``, :mod:`hil.host.impair`) is recorded on the timeline as the
sender's action ``mpa_request_drop``.  On each of that timeline's connections the
sender's own capture must show the MPA request (RFC 5044 section 7.1) at least twice:
the original and TCP's retransmission of it (RFC 9293 section 3.8.1), the segment of the
same sequence number and length.  The copies are matched by sequence number, not by a
second MPA decode: tshark does not dissect a retransmission's payload again
(:mod:`hil.wire.corrupted`).  The sender's point sees both: its tcpdump taps a
sent frame before the wire, and the drop is at the receiver's ingress (or a
middlebox's).  A request sent once means the drop never happened: "impairment not
effective", never a pass.
"""

from __future__ import annotations

from hil.judge.timeline import MPA_REQUEST_DROP, SIDES, Action
from hil.wire.link import Link
from hil.wire.rule import (
    NOT_EFFECTIVE,
    Outcome,
    WireCase,
    WireFinding,
    evidence,
    judged_by_action,
    missing,
)


def mpa_request_retransmitted(case: WireCase) -> Outcome:
    """Each connection of a timeline with an ``mpa_request_drop`` shows its MPA request
    sent again by TCP at the sender."""
    nothing = "no MPA request dropped in this test"
    return judged_by_action(case, MPA_REQUEST_DROP, _drop_findings, nothing)


def _drop_findings(lk: Link, drop: Action) -> list[WireFinding]:
    if lk.wire is None:
        return [missing(lk, "connection not on the wire")]
    sender = lk.timeline.pair[SIDES.index(drop.side)]
    request = lk.wire.mpa("request", sender)
    if request is None:
        return [missing(lk, f"the MPA request not captured at {sender}")]
    copies = [
        p
        for p in lk.wire.seen_by(sender)
        if p.src == request.src and p.seq == request.seq and p.length == request.length
    ]
    if len(copies) >= 2:
        return []
    return [
        WireFinding(
            f"{NOT_EFFECTIVE}: the MPA request left {sender} once (seq {request.seq}, "
            f"{request.length} bytes), never retransmitted, so the path did not drop it",
            lk.wire.name,
            evidence(request),
        )
    ]
