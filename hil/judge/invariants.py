"""Invariants 1-10 of the iWARP CM contract (docs/contract.md) as rules.

They hold on every provider; where providers differ (a second
CONNECT_REQUEST, how long destroy may block) the rule reads the profile of
the host whose behaviour it is: the connecting host retries with MPA v1, the
destroying host's connect timeout bounds its destroy.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import pairwise

from hil.judge import destroys
from hil.judge.profiles import Profiles
from hil.judge.rule import Finding, actor, errno_name, host_of, rule
from hil.judge.timeline import CONNECT_REPLIES, SIDES, Action, Event, Timeline

# How long after a peer's destroy returned its close is taken to have reached this host.
PEER_ABORT_SETTLE_S = 1.0
# Abortive closes: the QP goes to ERR (locally, or on the peer by the wire's TERMINATE/RST).
ABORTS = frozenset({"qp_err", "destroy", "kill"})


@rule(
    "connect-ends-once",
    1,
    "After rdma_connect() returns 0 exactly one of ESTABLISHED, REJECTED, UNREACHABLE, "
    "CONNECT_ERROR follows, never DISCONNECTED first; after a failed rdma_connect() no "
    "event follows; one CONNECT_REQUEST per connect (two with cxgb4's MPA v1 retry)",
    "[src] iwcm.c cm_conn_rep_handler, cm_close_handler; cxgb4 cm.c MPA v1 retry",
)
def _connect_ends_once(tl: Timeline, profile: Profiles) -> Iterator[Finding]:
    for act in (a for a in tl.actions if a.name == "connect" and a.id):
        events = tl.events_for(act.id)
        got = [e for e in events if e.type in CONNECT_REPLIES]
        if not act.ok:
            late = [e for e in events if e.type in CONNECT_REPLIES | {"DISCONNECTED"}]
            if late:
                yield Finding(
                    f"rdma_connect on {act.id} failed ({act.result}) yet events followed",
                    tuple(late),
                    (act,),
                )
            continue
        if len(got) > 1:
            yield Finding(f"{act.id} got {len(got)} connect replies", tuple(got), (act,))
        destroyed = bool(tl.actions_for(act.id, "destroy"))
        if not got and not destroyed:
            yield Finding(
                f"connect on {act.id} ended with none of {', '.join(sorted(CONNECT_REPLIES))}",
                (),
                (act,),
            )
        first_reply_seq = got[0].seq if got else None
        early = [
            e
            for e in events
            if e.type == "DISCONNECTED" and (first_reply_seq is None or e.seq < first_reply_seq)
        ]
        if early:
            yield Finding(
                f"{act.id} got DISCONNECTED before its connect reply", tuple(early), (act,)
            )
    by_conn: dict[str, list[Event]] = {}
    for e in tl.events:
        if e.type == "CONNECT_REQUEST" and e.conn:
            by_conn.setdefault(e.conn, []).append(e)
    for conn, requests in sorted(by_conn.items()):
        # The connecting host (the other side of its requests) is the one that retries.
        connector = host_of(tl, SIDES[1 - SIDES.index(requests[0].side)])
        allowed = 2 if profile.of(connector).mpa_v1_retry else 1
        if len(requests) > allowed:
            yield Finding(
                f"connection {conn} brought {len(requests)} CONNECT_REQUESTs "
                f"(at most {allowed} under the profile of {connector}, which connected)",
                tuple(requests),
            )


@rule(
    "no-ib-only-events",
    2,
    "iWARP never delivers CONNECT_RESPONSE or TIMEWAIT_EXIT",
    "[src] cma.c cma_iw_handler maps no provider event to them",
)
def _no_ib_only_events(tl: Timeline, profile: Profiles) -> Iterator[Finding]:
    bad = [e for e in tl.events if e.type in ("CONNECT_RESPONSE", "TIMEWAIT_EXIT")]
    if bad:
        yield Finding("InfiniBand-only events on an iWARP connection", tuple(bad))


@rule(
    "disconnect-once-after-established",
    3,
    "At most one DISCONNECTED per cm_id, and only after its ESTABLISHED",
    "[src] iwcm.c cm_close_handler (CLOSE once, from ESTABLISHED/CLOSING)",
)
def _disconnect_once(tl: Timeline, profile: Profiles) -> Iterator[Finding]:
    for cm_id in sorted({e.id for e in tl.events if e.type == "DISCONNECTED"}):
        events = tl.events_for(cm_id)
        discs = [e for e in events if e.type == "DISCONNECTED"]
        if len(discs) > 1:
            yield Finding(f"{cm_id} got {len(discs)} DISCONNECTED events", tuple(discs))
        est = next((e for e in events if e.type == "ESTABLISHED"), None)
        if est is None or discs[0].seq < est.seq:
            yield Finding(
                f"{cm_id} got DISCONNECTED without ESTABLISHED before it",
                (discs[0],) if est is None else (discs[0], est),
            )


@rule(
    "no-event-before-accept",
    4,
    "A new id sees no event between CONNECT_REQUEST and accept (none at all if never "
    "accepted); accept fails only with ECONNRESET (peer aborted first)",
    "[src] iwcm.c iw_cm_accept, cm_conn_req_handler",
)
def _no_event_before_accept(tl: Timeline, profile: Profiles) -> Iterator[Finding]:
    for req in (e for e in tl.events if e.type == "CONNECT_REQUEST"):
        accepts = tl.actions_for(req.id, "accept")
        until = accepts[0].t_us if accepts else None
        early = [
            e
            for e in tl.events_for(req.id)
            if e is not req and e.seq > req.seq and (until is None or e.t_us < until)
        ]
        if early:
            when = "before accept" if accepts else "though it was never accepted"
            yield Finding(f"{req.id} got events {when}", (req, *early), tuple(accepts[:1]))
        for act in accepts[:1]:  # a later one answers no request: answer-on-closed-id-fails
            if not act.ok and errno_name(act.result) != "ECONNRESET":
                yield Finding(
                    f"accept on {req.id} failed with {act.result}, not ECONNRESET", (req,), (act,)
                )


@rule(
    "disconnect-idempotent",
    7,
    "rdma_disconnect on an id already closing or closed returns 0",
    "[src] iwcm.c iw_cm_disconnect (CLOSING/IDLE: return 0)",
)
def _disconnect_idempotent(tl: Timeline, profile: Profiles) -> Iterator[Finding]:
    for act in (a for a in tl.actions if a.name == "disconnect" and a.id and not a.ok):
        before = [a for a in tl.actions_for(act.id, "disconnect") if a.t_us < act.t_us]
        closed = [
            e for e in tl.events_for(act.id) if e.type == "DISCONNECTED" and e.t_us < act.t_us
        ]
        if before or closed:
            yield Finding(
                f"repeated rdma_disconnect on {act.id} failed with {act.result}",
                tuple(closed),
                (*before, act),
            )


@rule(
    "answer-on-closed-id-fails",
    4,
    "rdma_accept or rdma_reject on an id that is no longer a pending request (answered "
    "already, or its connection closed: DISCONNECTED) fails with EINVAL and does nothing",
    "[src] iwcm.c iw_cm_accept, iw_cm_reject: state other than CONN_RECV -> -EINVAL",
)
def _answer_on_closed_id(tl: Timeline, profile: Profiles) -> Iterator[Finding]:
    for act in (a for a in tl.actions if a.name in ("accept", "reject") and a.id):
        earlier = [
            a
            for a in tl.actions_for(act.id)
            if a.name in ("accept", "reject") and a.ok and a.t_us < act.t_us
        ]
        closed = [
            e for e in tl.events_for(act.id) if e.type == "DISCONNECTED" and e.t_us < act.t_us
        ]
        if not (earlier or closed):
            continue
        if act.ok or errno_name(act.result) != "EINVAL":
            got = "succeeded" if act.ok else f"failed with {act.result}"
            why = "closed" if closed else "answered already"
            yield Finding(
                f"{act.name} on {act.id}, {why}, {got}: expected EINVAL",
                tuple(closed),
                (*earlier, act),
            )


@rule(
    "accept-after-peer-abort-fails",
    4,
    "rdma_accept on a request whose peer gave its connect up (its destroy in CONN_SENT "
    "returned, the connection closed) fails with ECONNRESET",
    "[src] iwcm.c iw_cm_accept; siw_cm.c siw_accept: an endpoint closed by the peer "
    "(SIW_CM_WORK_PEER_CLOSE) gives -ECONNRESET; [lab] siw",
)
def _accept_after_abort(tl: Timeline, profile: Profiles) -> Iterator[Finding]:
    settle_us = PEER_ABORT_SETTLE_S * 1e6 + tl.uncertainty_us(*tl.pair)
    for act in (a for a in tl.actions if a.name == "accept" and a.id):
        conn = tl.conn_of(act.id)
        if conn is None:
            continue  # its peer's ids are not known
        peers = {e.id for e in tl.events_of_conn(conn) if e.side != act.side}
        gone = [
            a
            for a in tl.actions
            if a.name == "destroy" and a.ok and a.id in peers and a.end_us + settle_us < act.t_us
        ]
        if gone and errno_name(act.result) != "ECONNRESET":
            got = "succeeded" if act.ok else f"failed with {act.result}"
            yield Finding(
                f"accept on {act.id} {got} after its peer gave the connect up: expected ECONNRESET",
                tuple(tl.events_for(act.id)),
                (gone[0], act),
            )


@rule(
    "qp-err-until-close",
    9,
    "After an abortive close (QP to ERR, the peer's destroy, kill or QP to ERR) a "
    "connection's QP stays held, in ERR, until its id is destroyed: never gone, and "
    "never in another state where the provider reports it (rdma resource show qp)",
    "[src] iwcm.c cm_close_handler drops the QP reference only at CLOSE; siw_qp.c "
    "siw_qp_llp_close moves the QP to ERROR, siw_query_qp reports no state; [lab] siw",
)
def _qp_err_until_close(tl: Timeline, profile: Profiles) -> Iterator[Finding]:
    for read in (a for a in tl.actions if a.name == "qp_state" and a.ok and a.id):
        if any(
            a.t_us < read.t_us for a in tl.actions_for(read.id) if a.name in ("destroy", "kill")
        ):
            continue  # the user let it go
        abort = _abort_before(tl, read)
        state = str(read.params.get("state"))
        shown = actor(profile, tl, read).qp_state_reported  # else only held or gone
        if abort is not None and (state == "absent" or (shown and state != "ERR")):
            what = "is gone" if state == "absent" else f"is in {state}"
            yield Finding(
                f"QP {read.params.get('qpn')} of {read.id} {what} after the abortive close "
                f"by {abort.side}:{abort.name}, before its id was destroyed (expected ERR)",
                tuple(e for e in tl.events_for(read.id) if e.type == "DISCONNECTED"),
                (abort, read),
            )


def _abort_before(tl: Timeline, read: Action) -> Action | None:
    """The abortive close of ``read``'s connection (either side) before the read."""
    conn = tl.conn_of(read.id)
    ids = {e.id for e in tl.events_of_conn(conn)} if conn else {read.id}
    slack = tl.uncertainty_us(*tl.pair)
    return next(
        (
            a
            for a in tl.actions
            if a.id in ids and a.ok and a.name in ABORTS and a.t_us < read.t_us - slack
        ),
        None,
    )


@rule(
    "fifo-per-channel",
    10,
    "Each host's channel delivers its events in order: host stamps never go back and "
    "an id's events follow the connection's life (resolve, request/reply, disconnect)",
    "[src] iwcm.c ordered workqueue and work_list; ucma event_list FIFO",
)
def _fifo(tl: Timeline, profile: Profiles) -> Iterator[Finding]:
    # A channel is one endpoint of a host (``seq`` = endpoint * 1_000_000 + position):
    # two endpoints used at once (a storm's processes) interleave, each in its order.
    for host, channel in sorted({(e.host, e.seq // 1_000_000) for e in tl.events}):
        events = sorted(
            (e for e in tl.events if e.host == host and e.seq // 1_000_000 == channel),
            key=lambda e: e.seq,
        )
        for prev, cur in pairwise(events):
            if cur.host_t_us < prev.host_t_us:
                yield Finding(
                    f"{host} delivered an event stamped before the previous one", (prev, cur)
                )
        last: dict[str, Event] = {}
        for cur in events:
            before = last.get(cur.id)
            if before and _RANK.get(cur.type, 0) < _RANK.get(before.type, 0):
                yield Finding(f"{cur.id} got {cur.type} after {before.type}", (before, cur))
            last[cur.id] = cur


_RANK = {
    "ADDR_RESOLVED": 0,
    "ADDR_ERROR": 0,
    "ROUTE_RESOLVED": 1,
    "ROUTE_ERROR": 1,
    "CONNECT_REQUEST": 1,
    "ESTABLISHED": 2,
    "REJECTED": 2,
    "UNREACHABLE": 2,
    "CONNECT_ERROR": 2,
    "DISCONNECTED": 3,
}


RULES = (
    _connect_ends_once,
    _no_ib_only_events,
    _disconnect_once,
    _no_event_before_accept,
    *destroys.RULES,
    _disconnect_idempotent,
    _answer_on_closed_id,
    _accept_after_abort,
    _qp_err_until_close,
    _fifo,
)
