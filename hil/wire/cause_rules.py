"""The wire rule that every connection event has the packet that caused it, placed
on the timeline within the clock uncertainty (so it needs the clock offsets)."""

from __future__ import annotations

from hil.judge.timeline import Event
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


def _cause_exempt(lk: Link, e: Event) -> bool:
    """A DISCONNECTED a pull or the host's own abort explains without a packet."""
    if e.type != "DISCONNECTED":
        return False
    before = [a for a in lk.timeline.actions if a.t_us <= e.t_us]
    own = [a for a in before if a.side == e.side and a.name in ABORTIVE]
    return bool(own) or any(a.name == "pull" for a in before)


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
            causes = [p for p in lk.wire.seen_by(point) if _is_cause(e.type, p)]
            ok = any(
                p.t_us is not None and p.t_us <= e.t_us + case.slack_us(p, e.host) for p in causes
            )
            if not ok:
                findings.append(
                    WireFinding(
                        f"{e.brief()}: no {CAUSES[e.type]} on the wire before it",
                        lk.wire.name,
                        evidence(*causes[:2]),
                    )
                )
    return judged(findings, count, "no connection event to explain")
