"""Invariants 1-10 of the iWARP CM contract (docs/contract.md) as rules.

They hold on every provider; where providers differ (a second
CONNECT_REQUEST, how long destroy may block) the rule reads the profile of
the host whose behaviour it is: the connecting host retries with MPA v1, the
destroying host's connect timeout bounds its destroy.

Each topic has its module: destroy (invariants 5-7) :mod:`hil.judge.destroys`,
answering a request (4) :mod:`hil.judge.answers`, closing (3, 7, 9)
:mod:`hil.judge.closes`; the connect (1, 2) and the channel's order (10) are
here, and :data:`RULES` lists them all.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import pairwise

from hil.judge import answers, closes, destroys
from hil.judge.profiles import Profiles
from hil.judge.rule import Finding, host_of, rule
from hil.judge.timeline import CONNECT_REPLIES, SIDES, Event, Timeline


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


# In the contract's order (docs/contract.md): a verdict lists its findings so.
RULES = (
    _connect_ends_once,
    _no_ib_only_events,
    closes.disconnect_once,
    answers.no_event_before_accept,
    *destroys.RULES,
    closes.disconnect_idempotent,
    answers.answer_on_closed_id,
    answers.accept_after_abort,
    closes.qp_err_until_close,
    _fifo,
)
