"""Wire rules of the MPA exchange: private data, revision and flags, rejects, the MPA v2
IRD/ORD words (docs/wire.md, docs/ird-ord.md)."""

from __future__ import annotations

from collections.abc import Iterator

from hil.judge.expectations import pdata_mismatch
from hil.judge.irdord import Depths, reported
from hil.judge.profiles import WireExpect
from hil.judge.timeline import Action, Event
from hil.wire.link import Link
from hil.wire.model import Connection, Mpa, Packet
from hil.wire.rule import Outcome, WireCase, WireFinding, evidence, judged, link_host, missing


def _pdata(action: Action) -> str:
    return str(action.params.get("private_data", "")).lower()


def _reached_mpa(lk: Link) -> bool:
    return any(e.type in ("ESTABLISHED", "CONNECT_REQUEST") for e in lk.events())


def _pdata_differs(lk: Link, frame: Packet, want: str, call: str) -> list[WireFinding]:
    """A finding when MPA ``frame`` does not carry the private data ``call`` was given."""
    assert frame.mpa is not None
    wrong = pdata_mismatch(want, frame.mpa.private_data)
    if wrong is None:
        return []
    name = lk.wire.name if lk.wire else None
    return [WireFinding(f"MPA {frame.mpa.kind} {wrong} {call} gave", name, evidence(frame))]


def request_pdata(case: WireCase) -> Outcome:
    findings, count = [], 0
    for lk in case.links:
        if lk.connect.params.get("listener") is False or not _reached_mpa(lk):
            continue
        count += 1
        req = lk.wire.mpa("request") if lk.wire else None
        if req is None or req.mpa is None:
            findings.append(missing(lk, "no MPA request on the wire"))
            continue
        findings += _pdata_differs(lk, req, _pdata(lk.connect), "rdma_connect")
    return judged(findings, count, "no connect reached the MPA exchange")


def reply_pdata(case: WireCase) -> Outcome:
    findings, count = [], 0
    for lk in case.links:
        for accept in lk.actions("accept"):
            if not accept.ok:
                continue
            count += 1
            reply = lk.wire.mpa("reply") if lk.wire else None
            if reply is None or reply.mpa is None or reply.mpa.reject:
                findings.append(missing(lk, "no accepting MPA reply on the wire"))
                continue
            findings += _pdata_differs(lk, reply, _pdata(accept), "rdma_accept")
    return judged(findings, count, "no accept in this test")


def _mpa_wrong(m: Mpa, exp: WireExpect) -> list[str]:
    """What in MPA frame ``m`` its sender's expectations ``exp`` do not allow."""
    wrong = []
    if m.revision not in exp.mpa_revisions:
        wrong.append(f"revision {m.revision} (expected {sorted(exp.mpa_revisions)})")
    if m.marker:
        wrong.append("marker flag set (no iWARP provider here uses markers)")
    if exp.crc is not None and m.crc != exp.crc:
        wrong.append(f"CRC flag {int(m.crc)} (expected {int(exp.crc)})")
    if m.revision == 2 and m.enhanced != exp.enhanced:
        wrong.append(f"enhanced flag {int(m.enhanced)} (expected {int(exp.enhanced)})")
    return wrong


def revision_and_flags(case: WireCase) -> Outcome:
    findings, count = [], 0
    for conn in case.exchange.connections:
        for p in conn.seen_by():
            if p.mpa is None:
                continue
            count += 1
            sender = case.host_of(conn, conn.role(p))
            # The sender's expectations; unknown sender: the frame passes if any host's allow it.
            wrong = min((_mpa_wrong(p.mpa, exp) for exp in case.expects(sender)), key=len)
            if wrong:
                findings.append(
                    WireFinding(f"MPA {p.mpa.kind}: {'; '.join(wrong)}", conn.name, evidence(p))
                )
    return judged(findings, count, "no MPA frame on the wire")


def _teardown_after(conn: Connection, after: Packet) -> Packet | None:
    """The first FIN or RST the sender of ``after`` sent after it (same capture point)."""
    pkts = conn.seen_by(after.point)
    later = pkts[pkts.index(after) + 1 :] if after in pkts else ()
    return next((p for p in later if p.src == after.src and p.flags & {"FIN", "RST"}), None)


def _reject_replies(case: WireCase) -> Iterator[tuple[Connection, Packet, Action | None]]:
    """Each MPA reject on the wire, with the reject action it answers (timeline mode)."""
    rejects = {
        id(lk.wire): next((a for a in lk.actions("reject") if a.ok), None)
        for lk in case.links
        if lk.wire
    }
    for conn in case.exchange.connections:
        reply = conn.mpa("reply")
        if reply is not None and reply.mpa is not None and reply.mpa.reject:
            yield conn, reply, rejects.get(id(conn))


def reject_on_wire(case: WireCase) -> Outcome:
    findings, count = [], 0
    for lk in case.links:  # a reject the application made must be on the wire
        for rej in (a for a in lk.actions("reject") if a.ok):  # a failed one did nothing
            reply = lk.wire.mpa("reply") if lk.wire else None
            if reply is None or reply.mpa is None or not reply.mpa.reject:
                findings.append(missing(lk, f"{rej.brief()} but no MPA reply with the reject flag"))
    count = len(findings)
    for conn, reply, action in _reject_replies(case):
        count += 1
        assert reply.mpa is not None
        wrong = action and pdata_mismatch(_pdata(action), reply.mpa.private_data)
        if wrong:
            findings.append(
                WireFinding(f"MPA reject {wrong} rdma_reject gave", conn.name, evidence(reply))
            )
        end = _teardown_after(conn, reply)
        rejecter = case.host_of(conn, conn.role(reply))
        allowed = frozenset().union(*(e.reject_teardown for e in case.expects(rejecter)))
        kinds = {f for f in ("FIN", "RST") if end is not None and f in end.flags}
        if end is None or not kinds & allowed:
            what = "no FIN or RST" if end is None else "+".join(sorted(kinds))
            findings.append(
                WireFinding(
                    f"after its MPA reject the rejecting side sent {what} "
                    f"(expected {' or '.join(sorted(allowed))})",
                    conn.name,
                    evidence(reply, end),
                )
            )
    return judged(findings, count, "no reject in this test")


def _words(m: Mpa) -> Depths:
    assert m.ird is not None and m.ord is not None
    return m.ird, m.ord


def _depths_compared(
    lk: Link, case: WireCase, frame: Packet
) -> Iterator[tuple[Event, Depths, Depths]]:
    """Each event of ``lk`` that reports IRD/ORD words of MPA ``frame``: the event, what
    it reports and what the frame's words say it should (its host's profile reads it)."""
    assert frame.mpa is not None
    ird, ord_ = _words(frame.mpa)
    passive = "b" if lk.active_side == "a" else "a"
    for e in lk.events():
        p = case.profile.of(link_host(lk, "active" if e.side == lk.active_side else "passive"))
        got = reported(e, p.ird_ord) if p.ird_ord else None
        # The request's words are the initiator's: the passive side's CONNECT_REQUEST
        # reports them mirrored; the reply's are the responder's own, the initiator's
        # ESTABLISHED their mirror (RFC 6581 section 3).
        if got is None:
            continue
        if frame.mpa.kind == "request" and e.type == "CONNECT_REQUEST":
            yield e, got, (ord_, ird)
        elif frame.mpa.kind == "reply" and e.type == "ESTABLISHED":
            yield e, got, (ird, ord_) if e.side == passive else (ord_, ird)


def ird_ord_words(case: WireCase) -> Outcome:
    findings, count = [], 0
    for lk in case.links:
        for kind in ("request", "reply"):
            frame = lk.wire.mpa(kind) if lk.wire else None
            if frame is None or frame.mpa is None or frame.mpa.reject or frame.mpa.ird is None:
                continue
            compared = list(_depths_compared(lk, case, frame))
            count += bool(compared)
            name = lk.wire.name if lk.wire else None
            findings += [
                WireFinding(
                    f"MPA {kind} carries IRD {frame.mpa.ird} / ORD {frame.mpa.ord}, but side "
                    f"{e.side}'s {e.type} reports IRD {got[0]} / ORD {got[1]} (expected "
                    f"{want[0]} / {want[1]})",
                    name,
                    evidence(frame),
                )
                for e, got, want in compared
                if got != want
            ]
    return judged(findings, count, "no MPA v2 IRD/ORD words the events report")
