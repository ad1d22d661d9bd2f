"""IRD/ORD negotiation (RFC 6581 section 3) and what reports it: the ``ird-ord-*`` rules.

An application asks for its IRD (``rdma_conn_param.responder_resources``: the
RDMA READs it takes at once as responder) and ORD (``initiator_depth``: those
it issues at once) in rdma_connect and rdma_accept; rdma_cm hands them to
iw_cm as ``iw_cm_conn_param.ird``/``ord`` (cma.c:4402-4403, 4555-4556, 6.1).
The initiator's go into the MPA v2 request's IRD and ORD words; the responder
answers with its own in the reply, where its ORD may not exceed the
initiator's IRD and the initiator's ORD may not exceed its IRD (RFC 6581
section 3); each side's QP then takes the negotiated depths.  The events
report them: CONNECT_REQUEST the request, seen from the passive side (its IRD
to give is the initiator's ORD; cma.c:2556-2557), ESTABLISHED the side's
negotiated values (cma.c:2504-2505, 2521-2522), in the order the profile
says.  The provider's own choices (its limits, relaxed or strict
negotiation, how ESTABLISHED and ibv_query_qp report, READs past the ORD)
are :class:`~hil.judge.profile.IrdOrdPromise`; docs/ird-ord.md has them.

The timeline: ``connect`` and ``accept`` actions keep the ``ird`` and ``ord``
asked (an action without them asked 1 and 1, the agent's default), events
the ``responder_resources`` and ``initiator_depth`` reported, ``query_qp``
actions the QP's ``max_rd_atomic`` and ``max_dest_rd_atomic``, ``reads``
actions the reader's checks of ``count`` concurrent READs.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from hil.judge.profile import IrdOrdPromise
from hil.judge.profiles import Profiles
from hil.judge.rule import Finding, host_of, rule
from hil.judge.timeline import Action, Event, Timeline

# librdmacm reads 255 as "the most the device takes" (RDMA_MAX_RESP_RES and
# RDMA_MAX_INIT_DEPTH, rdma_cma.h; rdma_connect and rdma_accept in librdmacm/cma.c).
MAX_ASK = 255
Depths = tuple[int, int]  # (IRD, ORD) of one side


@dataclass(frozen=True)
class Negotiation:
    """One connection's IRD/ORD evidence: the connect, the passive side's request and
    accept, and each side's ESTABLISHED (None: not in the timeline)."""

    label: str | None
    connect: Action
    request: Event | None
    accept: Action | None
    active_est: Event | None
    passive_est: Event | None

    @property
    def passive(self) -> str:
        """The passive side (``a``/``b``)."""
        return "b" if self.connect.side == "a" else "a"

    def name(self, tl: Timeline) -> str:
        """``connection c1 (a lab-a -> b lab-b)``."""
        conn = f"connection {self.label}" if self.label else "an unlabelled connection"
        a, p = self.connect.side, self.passive
        return f"{conn} ({a} {host_of(tl, a)} -> {p} {host_of(tl, p)})"


def asked(action: Action, limit: Depths) -> Depths:
    """The (IRD, ORD) ``action`` asked for, 255 read as ``limit``'s."""
    ird, ord_ = int(action.params.get("ird", 1)), int(action.params.get("ord", 1))
    return (limit[0] if ird == MAX_ASK else ird, limit[1] if ord_ == MAX_ASK else ord_)


def over_limit(action: Action, p: IrdOrdPromise) -> list[str]:
    """What ``action`` asked past the provider's limits (255 is no excess)."""
    ird, ord_ = int(action.params.get("ird", 1)), int(action.params.get("ord", 1))
    return [
        f"{name} {value} (max {most})"
        for name, value, most in (("IRD", ird, p.max_ird), ("ORD", ord_, p.max_ord))
        if value != MAX_ASK and value > most
    ]


def asks_past_limit(action: Action, profile: Profiles, tl: Timeline) -> bool:
    """Whether connect or accept ``action`` asked an IRD or ORD past its host's limit: a
    call refused for that (``ird-ord-over-limit-refused``), not for its private data or
    the request's state."""
    p = promise(profile, tl, action.side)
    return p is not None and bool(over_limit(action, p))


def requested(n: Negotiation, p: IrdOrdPromise) -> Depths:
    """What the passive side's CONNECT_REQUEST must report as its (IRD, ORD): the
    initiator's ORD and IRD, mirrored, at most the provider's limits."""
    ird, ord_ = asked(n.connect, (p.max_ird, p.max_ord))
    return min(ord_, p.max_ird), min(ird, p.max_ord)


def negotiated(n: Negotiation, p: IrdOrdPromise) -> tuple[Depths, Depths] | None:
    """The (IRD, ORD) the active and the passive side end with (None: no accept).

    An accept's 255 is the request's value, at most the limit (librdmacm rdma_accept).
    Relaxed: the responder's IRD is raised to the initiator's ORD, its ORD lowered to
    the initiator's IRD (siw_cm.c:1613-1628, 6.1.192); the initiator takes the reply's
    words, mirrored (siw_cm.c:828-829)."""
    if n.accept is None:
        return None
    want_ird, want_ord = requested(n, p)
    ird, ord_ = asked(n.accept, (want_ird, want_ord))
    if p.relaxed:
        ird, ord_ = max(ird, want_ird), min(ord_, want_ord)
    return (ord_, ird), (ird, ord_)


def reported(e: Event, p: IrdOrdPromise) -> Depths | None:
    """The (IRD, ORD) event ``e`` reports (None: it carries no words)."""
    if e.responder_resources is None or e.initiator_depth is None:
        return None
    if e.type == "ESTABLISHED" and p.established_swapped:
        return e.initiator_depth, e.responder_resources
    return e.responder_resources, e.initiator_depth


def negotiations(tl: Timeline) -> Iterator[Negotiation]:
    """Every connect of ``tl`` that succeeded, with its connection's evidence."""
    for c in (a for a in tl.actions if a.name == "connect" and a.ok and a.id):
        label = tl.conn_of(c.id)
        own = tl.events_for(c.id)
        passive = tl.events_of_conn(label, "b" if c.side == "a" else "a") if label else []
        req = next((e for e in passive if e.type == "CONNECT_REQUEST"), None)
        acc = next((a for a in tl.actions_for(req.id, "accept") if a.ok), None) if req else None
        yield Negotiation(
            label,
            c,
            req,
            acc,
            next((e for e in own if e.type == "ESTABLISHED"), None),
            next((e for e in passive if e.type == "ESTABLISHED"), None),
        )


def promise(profile: Profiles, tl: Timeline, side: str) -> IrdOrdPromise | None:
    """The IRD/ORD promise of the host on ``side`` (None: not judged)."""
    return profile.of(host_of(tl, side)).ird_ord


def _said(depths: Depths) -> str:
    return f"IRD {depths[0]} / ORD {depths[1]}"


@rule(
    "ird-ord-request-reported",
    None,
    "The passive side's CONNECT_REQUEST reports the IRD/ORD the active side asked, mirrored: "
    "its IRD to give is the initiator's ORD, its ORD the initiator's IRD",
    "[src] RFC 6581 section 3 (the request's IRD and ORD words); cma.c:2556-2557 (6.1); "
    "the profile's ird_ord (siw_cm.c:333-334, 672-675)",
)
def request_reported(tl: Timeline, profile: Profiles) -> Iterator[Finding]:
    for n in negotiations(tl):
        p = promise(profile, tl, n.passive)
        got = reported(n.request, p) if n.request and p else None
        if p is None or n.request is None or got is None:
            continue
        want = requested(n, p)
        if got != want:
            asked_for = _said(asked(n.connect, (p.max_ird, p.max_ord)))
            yield Finding(
                f"{n.name(tl)}: CONNECT_REQUEST reports {_said(got)} (responder_resources "
                f"{n.request.responder_resources}, initiator_depth {n.request.initiator_depth}); "
                f"the active side asked {asked_for}, so expected {_said(want)}",
                (n.request,),
                (n.connect,),
            )


@rule(
    "ird-ord-negotiated",
    None,
    "ESTABLISHED reports on each side the IRD/ORD the negotiation gives it: the responder's "
    "ORD at most the initiator's IRD, the initiator's ORD at most the responder's IRD, the "
    "initiator taking the reply's words mirrored",
    "[src] RFC 6581 section 3; cma.c:2504-2505, 2521-2522 (6.1); the profile's ird_ord "
    "(siw_cm.c:32, 330-331, 828-829, 1613-1628)",
)
def established_negotiated(tl: Timeline, profile: Profiles) -> Iterator[Finding]:
    for n in negotiations(tl):
        for side, est, which in ((n.connect.side, n.active_est, 0), (n.passive, n.passive_est, 1)):
            p = promise(profile, tl, side)
            both = negotiated(n, p) if p else None
            got = reported(est, p) if est and p else None
            if est is None or both is None or got is None or got == both[which]:
                continue
            yield Finding(
                f"{n.name(tl)}: side {side}'s ESTABLISHED reports {_said(got)}, the negotiation "
                f"gives it {_said(both[which])} (asked: connect {_said(_asked(n.connect))}, "
                f"accept {_said(_asked(n.accept))})",
                (est,),
                tuple(a for a in (n.connect, n.accept) if a),
            )


def _asked(a: Action | None) -> Depths:
    return (-1, -1) if a is None else (int(a.params.get("ird", 1)), int(a.params.get("ord", 1)))


@rule(
    "ird-ord-over-limit-refused",
    None,
    "A connect or accept asking an IRD or ORD past the device's maximum fails with the "
    "profile's errno",
    "[src] librdmacm ucma_valid_param (max_qp_rd_atom, max_qp_init_rd_atom of "
    "ibv_query_device(3)); the profile's ird_ord (siw.h:24-25, siw_cm.c:1371, 1593)",
)
def over_limit_refused(tl: Timeline, profile: Profiles) -> Iterator[Finding]:
    for a in (a for a in tl.actions if a.name in ("connect", "accept")):
        p = promise(profile, tl, a.side)
        excess = over_limit(a, p) if p else []
        if p is None or not excess or a.result == p.refusal:
            continue
        yield Finding(
            f"side {a.side} ({host_of(tl, a.side)}): {a.name} asking {', '.join(excess)} "
            f"returned {a.result}, expected {p.refusal}",
            (),
            (a,),
        )


def _side_depths(tl: Timeline, cm_id: str, profile: Profiles) -> Depths | None:
    """The (IRD, ORD) negotiated for the side of cm_id ``cm_id``."""
    for n in negotiations(tl):
        ends = {n.connect.id: 0, n.request.id if n.request else None: 1}
        p = promise(profile, tl, cm_id.split(":")[0])
        both = negotiated(n, p) if p else None
        if cm_id in ends and both is not None:
            return both[ends[cm_id]]
    return None


def _pow2(n: int) -> int:
    """``n`` rounded up to a power of two (0 stays 0: siw_qp_readq_init allocates none)."""
    return 1 << (n - 1).bit_length() if n > 0 else 0


@rule(
    "ird-ord-qp-depths",
    None,
    "The QP's RDMA READ depths (ibv_query_qp max_rd_atomic, max_dest_rd_atomic) are the "
    "negotiated ORD and IRD, as the profile says the provider reports them",
    "[src] ibv_query_qp(3); the profile's ird_ord (siw_verbs.c:520-521, siw_qp.c:203-211, 6.1.192)",
)
def qp_depths(tl: Timeline, profile: Profiles) -> Iterator[Finding]:
    for a in (a for a in tl.actions if a.name == "query_qp" and a.ok):
        p = promise(profile, tl, a.side)
        depths = _side_depths(tl, a.id or "", profile)
        if p is None or depths is None:
            continue
        ird, ord_ = (_pow2(d) for d in depths) if p.qp_pow2 else depths
        want = (ird, ord_) if p.qp_swapped else (ord_, ird)
        got = (a.params.get("max_rd_atomic"), a.params.get("max_dest_rd_atomic"))
        if got != want:
            yield Finding(
                f"side {a.side} ({host_of(tl, a.side)}) {a.id}: the QP reports max_rd_atomic "
                f"{got[0]}, max_dest_rd_atomic {got[1]}; negotiated {_said(depths)}, so "
                f"expected {want[0]} and {want[1]}",
                (),
                (a,),
            )


@rule(
    "ird-ord-reads",
    None,
    "As many concurrent RDMA READs as the negotiated ORD complete, each slice read as the "
    "peer wrote it; past the ORD they do what the profile says",
    "[src] RFC 5040 section 5.3 (READs within the ORD); RFC 6581 section 3; the profile's "
    "ird_ord.reads_past_ord (siw_qp.c:940-952, 6.1.192)",
)
def reads_complete(tl: Timeline, profile: Profiles) -> Iterator[Finding]:
    for a in (a for a in tl.actions if a.name == "reads" and a.params.get("reader")):
        p = promise(profile, tl, a.side)
        depths = _side_depths(tl, a.id or "", profile)
        count = int(a.params.get("count", 0))
        if p is None or depths is None:
            continue
        if count > depths[1] and p.reads_past_ord != "complete":
            continue
        for what in _reads_wrong(a):
            past = f", {count - depths[1]} past the ORD" if count > depths[1] else ""
            yield Finding(
                f"side {a.side} ({host_of(tl, a.side)}) {a.id}: {count} concurrent RDMA READs "
                f"(negotiated ORD {depths[1]}{past}): {what}",
                (),
                (a,),
            )


def _reads_wrong(a: Action) -> Iterator[str]:
    """What went wrong in one ``reads`` action of the reader."""
    if not a.ok:
        yield f"did not run: {a.result}"
        return
    checks = list(a.params.get("checks") or [])
    for k, c in enumerate(checks):
        if not c.get("ok"):
            yield (
                f"READ {k} of {c.get('size')} bytes: first bad byte at offset "
                f"{c.get('offset')}, expected {c.get('expected')}, got {c.get('got')}"
            )
    if a.params.get("error"):
        yield f"stopped: {a.params['error']}"
    elif len(checks) != int(a.params.get("count", 0)):
        yield f"checked {len(checks)} READs"


RULES = (request_reported, established_negotiated, over_limit_refused, qp_depths, reads_complete)
"""The ``ird-ord-*`` rules; each judges a host only when its profile has an
:class:`~hil.judge.profile.IrdOrdPromise`."""
