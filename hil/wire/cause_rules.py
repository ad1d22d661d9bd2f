"""The wire rule that every connection event has the packet that caused it, placed
on the timeline within the clock uncertainty (so it needs the clock offsets)."""

from __future__ import annotations

from hil.judge.timeline import LINK_DOWNS, Event
from hil.wire.close_rules import ABORTIVE
from hil.wire.link import Link
from hil.wire.model import Packet
from hil.wire.rule import Outcome, WireCase, WireFinding, evidence, judged

CAUSES = {
    "ESTABLISHED": "MPA reply",
    "REJECTED": "MPA reject, RST or FIN",
    "DISCONNECTED": "FIN, RST or TERMINATE",
}


def _is_cause(kind: str, p: Packet) -> bool:
    if kind == "ESTABLISHED":
        return p.mpa is not None and p.mpa.kind == "reply" and not p.mpa.reject
    if kind == "REJECTED":
        # A peer that closes before its MPA reply rejects too: siw upcalls CONNECT_REPLY
        # -ECONNRESET on a FIN while awaiting it (siw_cm.c:1086-1095, Linux 6.1.192), as
        # after an rdma_accept it refused (its error path releases the socket).
        return bool(p.flags & {"RST", "FIN"}) or (p.mpa is not None and p.mpa.reject)
    return bool(p.flags & {"FIN", "RST"}) or p.terminate is not None


def _original_missed(p: Packet, seen: tuple[Packet, ...]) -> bool:
    """A retransmission whose first sending this capture point never saw.

    Loss on the sender's egress (netem, docs/impairment.md) drops a packet before
    the capture tap (AF_PACKET sees egress after the qdisc), so a lost FIN shows only
    as its retransmission; the retransmission proves the original went out earlier,
    at a time the capture cannot give.
    """
    return p.retransmission and not any(
        q.src == p.src and q.seq == p.seq and not q.retransmission for q in seen
    )


def _cause_exempt(lk: Link, e: Event) -> bool:
    """A DISCONNECTED a pull, a flap or the host's own abort explains without a packet."""
    if e.type != "DISCONNECTED":
        return False
    before = [a for a in lk.timeline.actions if a.t_us <= e.t_us]
    own = [a for a in before if a.side == e.side and a.name in ABORTIVE]
    return bool(own) or any(a.name in LINK_DOWNS for a in before)


def every_event_has_cause(case: WireCase) -> Outcome:
    findings, count = [], 0
    for lk in case.links:
        if lk.wire is None:
            continue
        for e in lk.events():
            if e.type not in CAUSES or _cause_exempt(lk, e):
                continue
            count += 1
            point = e.host if e.host in lk.wire.points else None
            seen = lk.wire.seen_by(point)
            causes = [p for p in seen if _is_cause(e.type, p)]
            ok = any(
                p.t_us is not None and p.t_us <= e.t_us + case.slack_us(p, e.host) for p in causes
            ) or any(_original_missed(p, seen) for p in causes)
            if not ok:
                findings.append(
                    WireFinding(
                        f"{e.brief()}: no {CAUSES[e.type]} on the wire before it",
                        lk.wire.name,
                        evidence(*causes[:2]),
                    )
                )
    return judged(findings, count, "no connection event to explain")
