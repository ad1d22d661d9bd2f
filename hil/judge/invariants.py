"""Invariants 1-10 of the iWARP CM contract (docs/contract.md) as rules.

They hold on every provider; where providers differ (a second
CONNECT_REQUEST, how long destroy may block) the rule reads the profile of
the host whose behaviour it is: the connecting host retries with MPA v1, the
destroying host's connect timeout bounds its destroy.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import pairwise

from hil.judge.profiles import Profiles
from hil.judge.rule import CLOSE_ACTIONS, Finding, actor, errno_name, host_of, ms, replies, rule
from hil.judge.timeline import CONNECT_REPLIES, SIDES, Action, Event, Timeline


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
        for act in accepts:
            if not act.ok and errno_name(act.result) != "ECONNRESET":
                yield Finding(
                    f"accept on {req.id} failed with {act.result}, not ECONNRESET", (req,), (act,)
                )


@rule(
    "no-event-after-destroy",
    5,
    "No event for an id (or through a listener) after rdma_destroy_id returns, and no "
    "event for an id its channel no longer knows",
    "[src] iwcm.c IWCM_F_DROP_EVENTS and workqueue flush; ucma drops unreported events",
)
def _no_event_after_destroy(tl: Timeline, profile: Profiles) -> Iterator[Finding]:
    # The agent names a destroyed id's event by the handle it had; an event with no
    # id at all is for a cm_id pointer its channel never created or mapped: a freed
    # or foreign context the kernel should not have reported.
    unknown = [e for e in tl.events if not e.id]
    if unknown:
        yield Finding("events for an id the channel does not know (destroyed?)", tuple(unknown))
    for act in (a for a in tl.actions if a.name == "destroy" and a.ok and a.id):
        late = [
            e
            for e in tl.events
            if e.t_us > act.end_us and (e.id == act.id or e.listen_id == act.id)
        ]
        if late:
            yield Finding(f"events for {act.id} after its destroy returned", tuple(late), (act,))


@rule(
    "listener-destroy-rejects-pending",
    6,
    "Destroying a listener rejects requests not yet retrieved (the active side gets "
    "REJECTED); ids already accepted stay connected",
    "[src] cma.c cma_cancel_listens, ucma_cleanup_ctx_events; iwcm.c iw_destroy_cm_id",
)
def _listener_destroy(tl: Timeline, profile: Profiles) -> Iterator[Finding]:
    listeners = {e.listen_id for e in tl.events if e.listen_id}
    listeners |= {a.id for a in tl.actions if a.name == "listen" and a.id}
    for act in (a for a in tl.actions if a.name == "destroy" and a.id in listeners):
        yield from _pending_rejected(tl, act)
        yield from _accepted_survive(tl, act)


def _pending_rejected(tl: Timeline, destroy: Action) -> Iterator[Finding]:
    for conn_act in (
        a
        for a in tl.actions
        if a.name == "connect"
        and a.ok
        and a.id
        and a.side != destroy.side
        and a.t_us <= destroy.t_us
    ):
        conn = tl.conn_of(conn_act.id)
        retrieved = conn is not None and any(
            e.type == "CONNECT_REQUEST" and e.t_us <= destroy.t_us
            for e in tl.events_of_conn(conn, destroy.side)
        )
        got = replies(tl, conn_act.id)
        if retrieved or not got or got[0].t_us < destroy.t_us - tl.uncertainty_us(*tl.pair):
            continue  # not pending at the destroy; a missing reply is invariant 1's
        if got[0].type != "REJECTED":
            yield Finding(
                f"{conn_act.id} was pending on listener {destroy.id} when it was "
                f"destroyed but got {got[0].type}, not REJECTED",
                (got[0],),
                (destroy, conn_act),
            )


def _accepted_survive(tl: Timeline, destroy: Action) -> Iterator[Finding]:
    for acc in (
        a
        for a in tl.actions
        if a.name == "accept" and a.ok and a.id and a.side == destroy.side and a.t_us < destroy.t_us
    ):
        conn = tl.conn_of(acc.id)
        ids = {e.id for e in tl.events_of_conn(conn)} if conn else {acc.id}
        if any(a.name in CLOSE_ACTIONS | {"pull"} and a.id in ids for a in tl.actions):
            continue  # closed on purpose
        lost = [e for e in tl.events if e.id in ids and e.type == "DISCONNECTED"]
        if lost:
            yield Finding(
                f"accepted {acc.id} was disconnected when listener {destroy.id} was destroyed",
                tuple(lost),
                (destroy, acc),
            )


@rule(
    "destroy-in-conn-sent-bounded",
    7,
    "rdma_destroy_id on an id in CONN_SENT blocks, but only until the provider's "
    "connect timeout (siw MPAREQ_TIMEOUT 10 s, cxgb4 ep_timeout_secs)",
    "[src] iwcm.c destroy_cm_id waits for IWCM_F_CONNECT_WAIT; siw_cm.c MPAREQ_TIMEOUT",
)
def _destroy_conn_sent(tl: Timeline, profile: Profiles) -> Iterator[Finding]:
    for act in (a for a in tl.actions if a.name == "destroy" and a.id):
        bound_us = actor(profile, tl, act).conn_sent_destroy_bound_s * 1e6
        connects = [c for c in tl.actions_for(act.id, "connect") if c.ok and c.t_us < act.t_us]
        if not connects or any(e.t_us < act.t_us for e in replies(tl, act.id)):
            continue
        if not act.ok:
            yield Finding(f"destroy of {act.id} in CONN_SENT failed: {act.result}", (), (act,))
        elif act.duration_us is None:
            yield Finding(f"destroy of {act.id} in CONN_SENT has no measured duration", (), (act,))
        elif act.duration_us > bound_us:
            yield Finding(
                f"destroy of {act.id} in CONN_SENT blocked {ms(act.duration_us)}, "
                f"over {ms(bound_us)}",
                (),
                (act,),
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
    _no_event_after_destroy,
    _listener_destroy,
    _destroy_conn_sent,
    _disconnect_idempotent,
    _fifo,
)
