"""The wire rules: what the packets of a test must show, by name.

Each rule reads the provider's :class:`~hil.judge.profiles.WireExpect`
(``case.expects(host)``: the sending or closing host's), never the driver's
name.  docs/wire.md states each rule and its source.  A lab adds its own with
:func:`register_wire_rule`.
"""

from __future__ import annotations

from collections.abc import Iterator

from hil.errors import InputError
from hil.judge.access import ACCESS_ERRORS
from hil.judge.profiles import WireExpect
from hil.judge.timeline import SIDES, Action, Event
from hil.wire.link import Link
from hil.wire.model import Connection, Mpa, Packet
from hil.wire.rule import (
    Outcome,
    WireCase,
    WireFinding,
    WireRule,
    evidence,
    judged,
    link_host,
)

CLOSE_ACTIONS = ("disconnect", "qp_err", "destroy", "kill")
ABORTIVE = ("qp_err", "destroy", "kill")


def _pdata(action: Action) -> str:
    return str(action.params.get("private_data", "")).lower()


def _first_close(lk: Link) -> Action | None:
    closes = lk.actions(*CLOSE_ACTIONS)
    return closes[0] if closes else None


def _established_both(lk: Link, before_us: int) -> bool:
    sides = {e.side for e in lk.events() if e.type == "ESTABLISHED" and e.t_us <= before_us}
    return len(sides) == 2


def _pulled(lk: Link) -> bool:
    return any(a.name == "pull" for a in lk.timeline.actions)


def _reached_mpa(lk: Link) -> bool:
    return any(e.type in ("ESTABLISHED", "CONNECT_REQUEST") for e in lk.events())


def _missing(lk: Link, what: str) -> WireFinding:
    return WireFinding(f"{lk.connect.brief()}: {what} ({lk.how})", lk.conn)


def _pdata_differs(lk: Link, frame: Packet, want: str, call: str) -> list[WireFinding]:
    """A finding when MPA ``frame`` does not carry the private data ``call`` was given."""
    assert frame.mpa is not None
    got = frame.mpa.private_data
    if got == want:
        return []
    name = lk.wire.name if lk.wire else None
    text = f"MPA {frame.mpa.kind} carries private data {got!r}, {call} gave {want!r}"
    return [WireFinding(text, name, evidence(frame))]


def request_pdata(case: WireCase) -> Outcome:
    findings, count = [], 0
    for lk in case.links:
        if lk.connect.params.get("listener") is False or not _reached_mpa(lk):
            continue
        count += 1
        req = lk.wire.mpa("request") if lk.wire else None
        if req is None or req.mpa is None:
            findings.append(_missing(lk, "no MPA request on the wire"))
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
                findings.append(_missing(lk, "no accepting MPA reply on the wire"))
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
                findings.append(
                    _missing(lk, f"{rej.brief()} but no MPA reply with the reject flag")
                )
    count = len(findings)
    for conn, reply, action in _reject_replies(case):
        count += 1
        assert reply.mpa is not None
        if action is not None and reply.mpa.private_data != _pdata(action):
            findings.append(
                WireFinding(
                    f"MPA reject carries {reply.mpa.private_data!r}, "
                    f"rdma_reject gave {_pdata(action)!r}",
                    conn.name,
                    evidence(reply),
                )
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


def orderly_close(case: WireCase) -> Outcome:
    findings, count = [], 0
    for lk, close in _closes(case, ("disconnect",)):
        count += 1
        if lk.wire is None:
            findings.append(_missing(lk, "connection not on the wire"))
            continue
        w = lk.wire
        fins, rsts, terms = w.with_flag("FIN"), w.with_flag("RST"), w.terminates()
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
            findings.append(_missing(lk, "connection not on the wire"))
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
            findings.append(_missing(lk, "no SYN on the wire"))
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
    the writer is the pulled host, nothing of it reaches the peer until the
    link is back (a pulled host's own capture never sees what it sends, so
    its retransmissions cannot be shown).  An admin pull is seen by the host:
    siw ends its QPs at once, and the bytes its socket still held go out when
    the link is back, so only the reconnect's new 4-tuple is judged.
    """
    if lk.wire is None:
        return [_missing(lk, "connection not on the wire")]
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


def _pulled_writer(
    lk: Link, after: list[Packet], pull: Action, restore: Action | None
) -> list[WireFinding]:
    assert lk.wire is not None
    writer = lk.timeline.pair[0 if lk.active_side == "a" else 1]
    until = restore.t_us if restore is not None else None
    arrived = [
        p
        for p in after
        if p.point != writer
        and p.src == lk.wire.active
        and p.length
        and (until is None or (p.t_us or 0) < until)
        and (p.t_us or 0) > pull.end_us + lk.timeline.uncertainty_us(*lk.timeline.pair)
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


CAUSES = {
    "ESTABLISHED": "MPA reply",
    "REJECTED": "MPA reject or RST",
    "DISCONNECTED": "FIN, RST or TERMINATE",
}


def _is_cause(kind: str, p: Packet) -> bool:
    if kind == "ESTABLISHED":
        return p.mpa is not None and p.mpa.kind == "reply" and not p.mpa.reject
    if kind == "REJECTED":
        return "RST" in p.flags or (p.mpa is not None and p.mpa.reject)
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


WIRE_RULES: list[WireRule] = [
    WireRule(
        "mpa-request-carries-connect-pdata",
        "The MPA request carries the private data given to rdma_connect, after the MPA v2 "
        "IRD/ORD words (the contract's connect-pdata-delivered checks the peer's "
        "CONNECT_REQUEST).",
        request_pdata,
    ),
    WireRule(
        "mpa-reply-carries-accept-pdata",
        "The MPA reply carries the private data given to rdma_accept (the contract's "
        "accept-pdata-delivered checks the active side's ESTABLISHED).",
        reply_pdata,
    ),
    WireRule(
        "mpa-revision-and-flags",
        "MPA frames have the revision, CRC, marker and enhanced flags the profile says.",
        revision_and_flags,
        needs_timeline=False,
    ),
    WireRule(
        "reject-on-the-wire",
        "A reject is an MPA reply with the reject flag and the rejecting side's private data, "
        "followed by the teardown the profile names.",
        reject_on_wire,
        needs_timeline=False,
    ),
    WireRule(
        "orderly-close-is-fin",
        "rdma_disconnect of an idle connection gives a FIN from each side, no RST, no TERMINATE.",
        orderly_close,
    ),
    WireRule(
        "abortive-close-on-the-wire",
        "QP to ERR, destroy while connected and SIGKILL of the holder put TERMINATE and/or RST "
        "on the wire as the profile says, never a FIN-only close.",
        abortive_close,
    ),
    WireRule(
        "no-listener-is-rst",
        "A connect with no listener is a SYN answered by RST.",
        no_listener,
    ),
    WireRule(
        "remote-access-error-terminates",
        "An RDMA WRITE outside the peer's region makes the data sink send a TERMINATE with the "
        "DDP layer and the tagged-buffer error type and code.",
        access_error,
    ),
    WireRule(
        "link-pull-on-the-wire",
        "During a carrier pull under traffic the old 4-tuple shows the writer's "
        "retransmissions, then no traffic or an RST (or, when the writer is the pulled host, "
        "nothing of it arrives); the reconnect is a new 4-tuple.",
        link_pull,
        needs_clock=True,
    ),
    WireRule(
        "every-teardown-event-has-a-cause",
        "Each ESTABLISHED, REJECTED and DISCONNECTED has the packet that caused it (MPA reply, "
        "reject, FIN, RST, TERMINATE) on the wire before it, within the clock uncertainty.",
        every_event_has_cause,
        needs_clock=True,
    ),
]


def register_wire_rule(rule: WireRule) -> WireRule:
    """Add a lab's own wire rule to those every wire verdict runs; returns it."""
    if any(r.name == rule.name for r in WIRE_RULES):
        raise InputError(f"wire rule {rule.name!r} is registered already")
    WIRE_RULES.append(rule)
    return rule


def wire_rule_named(name: str) -> WireRule:
    """The registered wire rule of this name."""
    for r in WIRE_RULES:
        if r.name == name:
            return r
    known = ", ".join(r.name for r in WIRE_RULES)
    raise InputError(f"no wire rule {name!r} (known: {known})")
