"""Wire rules of the MPA exchange: private data, revision and flags, rejects (docs/wire.md)."""

from __future__ import annotations

from collections.abc import Iterator

from hil.judge.expectations import pdata_mismatch
from hil.judge.profiles import WireExpect
from hil.judge.timeline import Action
from hil.wire.link import Link
from hil.wire.model import Connection, Mpa, Packet
from hil.wire.rule import Outcome, WireCase, WireFinding, evidence, judged, missing


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
