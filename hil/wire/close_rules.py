"""Wire rules of how a connection ends: orderly, abortive, refused, terminated.

An orderly or abortive close is judged only on a connection both sides saw
ESTABLISHED and no link pull cut (:mod:`hil.wire.pull_rules` judges those);
docs/wire.md states each rule.
"""

from __future__ import annotations

from collections.abc import Iterator

from hil.judge.access import ACCESS_ERRORS
from hil.judge.timeline import LINK_DOWNS, SIDES, Action
from hil.wire.link import Link
from hil.wire.model import Connection, Packet
from hil.wire.rule import Outcome, WireCase, WireFinding, evidence, judged, link_host, missing

CLOSE_ACTIONS = ("disconnect", "qp_err", "destroy", "kill")
ABORTIVE = ("qp_err", "destroy", "kill")


def _first_close(lk: Link) -> Action | None:
    closes = lk.actions(*CLOSE_ACTIONS)
    return closes[0] if closes else None


def _established_both(lk: Link, before_us: int) -> bool:
    sides = {e.side for e in lk.events() if e.type == "ESTABLISHED" and e.t_us <= before_us}
    return len(sides) == 2


def _pulled(lk: Link) -> bool:
    return any(a.name in LINK_DOWNS for a in lk.timeline.actions)


def _signals(conn: Connection) -> set[str]:
    pkts = conn.seen_by()
    found: set[str] = {f for p in pkts for f in ("FIN", "RST") if f in p.flags}
    if any(p.terminate is not None for p in pkts):
        found.add("TERMINATE")
    return found


def _closes(case: WireCase, names: tuple[str, ...]) -> Iterator[tuple[Link, Action]]:
    """Connected links whose first close is one of ``names``, outside link pulls."""
    for lk in case.links:
        first = _first_close(lk)
        if first is not None and first.name in names and not _pulled(lk):
            if _established_both(lk, first.t_us):
                yield lk, first


def _stray_answer(w: Connection, rst: Packet) -> bool:
    """An RST a closed socket sent to a stray segment (a duplicated ACK, say), not a close.

    Its sequence number is one past its sender's own FIN: a segment arriving for a
    connection that no longer exists is answered by an RST whose sequence number is
    the segment's acknowledgment (RFC 9293 3.10.7.1), which acknowledged that FIN.
    """
    return any(
        w.role(f) == w.role(rst) and (f.seq + f.length + 1) % 2**32 == rst.seq
        for f in w.with_flag("FIN")
    )


def orderly_close(case: WireCase) -> Outcome:
    findings, count = [], 0
    for lk, close in _closes(case, ("disconnect",)):
        count += 1
        if lk.wire is None:
            findings.append(missing(lk, "connection not on the wire"))
            continue
        w = lk.wire
        fins, terms = w.with_flag("FIN"), w.terminates()
        rsts = [p for p in w.with_flag("RST") if not _stray_answer(w, p)]
        fin_from = {w.role(p) for p in fins}
        if fin_from != {"active", "passive"} or rsts or terms:
            sides = ", ".join(sorted(fin_from)) or "no side"
            findings.append(
                WireFinding(
                    f"{close.brief()}: FIN from {sides}, {len(rsts)} RST, "
                    f"{len(terms)} TERMINATE (expected a FIN from each side, "
                    f"no RST, no TERMINATE)",
                    w.name,
                    evidence(*[*rsts, *terms][:4], *fins[:2]),
                )
            )
    return judged(findings, count, "no orderly close of a connection in this test")


def abortive_close(case: WireCase) -> Outcome:
    findings, count = [], 0
    for lk, close in _closes(case, ABORTIVE):
        count += 1
        # What the host that closed puts on the wire (siw may close with a FIN only).
        (exp,) = case.expects(lk.timeline.pair[SIDES.index(close.side)])
        allowed = exp.abortive_signals
        if lk.wire is None:
            findings.append(missing(lk, "connection not on the wire"))
            continue
        seen = _signals(lk.wire)
        if not seen & allowed:
            shown = "+".join(sorted(seen)) or "nothing"
            never = "" if "FIN" in allowed else ", never a FIN-only close"
            findings.append(
                WireFinding(
                    f"{close.brief()}: the wire shows {shown} (expected "
                    f"{' and/or '.join(sorted(allowed))}{never})",
                    lk.wire.name,
                    evidence(*lk.wire.with_flag("FIN")[:2]),
                )
            )
    return judged(findings, count, "no abortive close of a connection in this test")


def no_listener(case: WireCase) -> Outcome:
    findings, count = [], 0
    for lk in case.links:
        if lk.connect.params.get("listener") is not False:
            continue
        count += 1
        w = lk.wire
        if w is None:
            findings.append(missing(lk, "no SYN on the wire"))
            continue
        syn = next((p for p in w.sent_by("active") if "SYN" in p.flags), None)
        rst = next((p for p in w.sent_by("passive") if "RST" in p.flags), None)
        mpa = next((p for p in w.seen_by() if p.mpa is not None), None)
        if syn is None or rst is None or mpa is not None:
            findings.append(
                WireFinding(
                    "a connect with no listener must be a SYN answered by RST"
                    + (" (and no MPA)" if mpa else ""),
                    w.name,
                    evidence(syn, rst, mpa),
                )
            )
    return judged(findings, count, "no connect without a listener in this test")


def _access_errors(case: WireCase) -> Iterator[tuple[Link, Action]]:
    for lk in case.links:
        for a in lk.actions("write"):
            if a.params.get("how") in ACCESS_ERRORS:
                yield lk, a


def access_error(case: WireCase) -> Outcome:
    findings, count = [], 0
    for lk, write in _access_errors(case):
        count += 1
        (exp,) = case.expects(link_host(lk, "passive"))  # the data sink sends the TERMINATE
        codes = dict(exp.access_error_codes).get(str(write.params.get("how")), frozenset())
        terms = lk.wire.terminates() if lk.wire else ()
        good = [
            p
            for p in terms
            if p.terminate is not None
            and p.terminate.layer == exp.access_error_layer
            and p.terminate.error_type == exp.access_error_type
            and p.terminate.error_code in codes
            and lk.wire is not None
            and lk.wire.role(p) == "passive"
        ]
        if not good:
            findings.append(
                WireFinding(
                    f"{write.brief()}: expected a TERMINATE from the data sink, layer "
                    f"{exp.access_error_layer}, error type {exp.access_error_type}, code in "
                    f"{sorted(codes)}; found {len(terms)} TERMINATE",
                    lk.wire.name if lk.wire else lk.conn,
                    evidence(*terms),
                )
            )
    return judged(findings, count, "no remote access error in this test")
