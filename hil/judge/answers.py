"""The contract's rules about answering a connect request (invariant 4 of docs/contract.md).

A new id sees no event before it is accepted; an answer to an id that is
no longer a pending request (answered already, or closed) fails with
EINVAL; an accept after the peer gave its connect up fails with ECONNRESET.
"""

from __future__ import annotations

from collections.abc import Iterator

from hil.judge.irdord import asks_past_limit
from hil.judge.profiles import Profiles
from hil.judge.rule import Finding, actor, errno_name, rule
from hil.judge.timeline import Action, Timeline

# How long after a peer's destroy returned its close is taken to have reached this host.
PEER_ABORT_SETTLE_S = 1.0


@rule(
    "no-event-before-accept",
    4,
    "A new id sees no event between CONNECT_REQUEST and accept (none at all if never "
    "accepted); accept fails only with ECONNRESET (peer aborted first), or refusing "
    "private data past the host's limit",
    "[src] iwcm.c iw_cm_accept, cm_conn_req_handler",
)
def no_event_before_accept(tl: Timeline, profile: Profiles) -> Iterator[Finding]:
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
            if (
                not act.ok
                and errno_name(act.result) != "ECONNRESET"
                and not _over_limit(act, profile, tl)
            ):
                yield Finding(
                    f"accept on {req.id} failed with {act.result}, not ECONNRESET", (req,), (act,)
                )


def _over_limit(act: Action, profile: Profiles, tl: Timeline) -> bool:
    """Whether ``act`` gave more private data than its host takes, or an IRD/ORD past its
    limit: refused for that, as ``pdata-over-limit-refused`` and
    ``ird-ord-over-limit-refused`` judge, before it looks at the request."""
    pdata = str(act.params.get("private_data", ""))
    too_long = len(pdata) // 2 > actor(profile, tl, act).private_data.of(act.name)
    return too_long or asks_past_limit(act, profile, tl)


def no_longer_pending(tl: Timeline, act: Action) -> bool:
    """Whether ``act`` (an accept or reject) came after its id was answered already or
    its connection closed (DISCONNECTED): not a pending request any more."""
    assert act.id is not None
    answered = any(
        a.name in ("accept", "reject") and a.ok and a.t_us < act.t_us
        for a in tl.actions_for(act.id)
    )
    closed = any(e.type == "DISCONNECTED" and e.t_us < act.t_us for e in tl.events_for(act.id))
    return answered or closed


@rule(
    "answer-on-closed-id-fails",
    4,
    "rdma_accept or rdma_reject on an id that is no longer a pending request (answered "
    "already, or its connection closed: DISCONNECTED) fails with EINVAL and does nothing",
    "[src] iwcm.c iw_cm_accept, iw_cm_reject: state other than CONN_RECV -> -EINVAL",
)
def answer_on_closed_id(tl: Timeline, profile: Profiles) -> Iterator[Finding]:
    for act in (a for a in tl.actions if a.name in ("accept", "reject") and a.id):
        if not no_longer_pending(tl, act):
            continue
        earlier = [
            a
            for a in tl.actions_for(act.id)
            if a.name in ("accept", "reject") and a.ok and a.t_us < act.t_us
        ]
        closed = [
            e for e in tl.events_for(act.id) if e.type == "DISCONNECTED" and e.t_us < act.t_us
        ]
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
def accept_after_abort(tl: Timeline, profile: Profiles) -> Iterator[Finding]:
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
