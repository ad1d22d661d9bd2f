"""The contract's rules about destroy (invariants 5, 6 and 7 of docs/contract.md).

No event after an id's destroy returned (nor for an id its channel no longer
knows); a listener's destroy bounded, its pending requests rejected and its
accepted ids kept; a destroy in CONN_SENT blocking, but only until the
provider's connect timer ends the connect, and not returning before it does
when the peer never answers.  :func:`pending_at` says which connects were
pending on a listener when it was destroyed: the listener suite's
"scenario not reached" reads it too.
"""

from __future__ import annotations

from collections.abc import Iterator

from hil.judge import staysup
from hil.judge.profiles import Profiles
from hil.judge.rule import Finding, actor, ms, replies, rule
from hil.judge.timeline import Action, Timeline

# What a peer does that answers (or ends) a connect in CONN_SENT early.
_ANSWERS = frozenset({"accept", "reject", "destroy", "kill", "qp_err"})


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
    for act in (a for a in tl.actions if a.name == "destroy" and a.id in _listeners(tl)):
        yield from _pending_rejected(tl, act)
        yield from _accepted_survive(tl, act)


def _listeners(tl: Timeline) -> set[str]:
    """The ids that listened (a listen action, or the listen_id of a request)."""
    listeners = {e.listen_id for e in tl.events if e.listen_id}
    return listeners | {a.id for a in tl.actions if a.name == "listen" and a.id}


def pending_at(tl: Timeline, destroy: Action) -> list[Action]:
    """The connects pending on the listener ``destroy`` destroyed: made from the other
    side before it, to its port where both ports are recorded, their CONNECT_REQUEST not
    retrieved before it and not answered before it (their reply, if any, came after the
    destroy began)."""
    port = _listen_port(tl, destroy.id)
    pending = []
    for conn_act in (
        a
        for a in tl.actions
        if a.name == "connect"
        and a.ok
        and a.id
        and a.side != destroy.side
        and a.t_us <= destroy.t_us
        and (port is None or a.params.get("port") in (None, port))
    ):
        conn = tl.conn_of(conn_act.id)
        retrieved = conn is not None and any(
            e.type == "CONNECT_REQUEST" and e.t_us <= destroy.t_us
            for e in tl.events_of_conn(conn, destroy.side)
        )
        got = replies(tl, conn_act.id)
        if not retrieved and not (got and got[0].t_us < destroy.t_us - tl.uncertainty_us(*tl.pair)):
            pending.append(conn_act)
    return pending


def _listen_port(tl: Timeline, listener: str | None) -> int | None:
    """The port ``listener`` listened on, when its listen action recorded one.  A race
    sweep has a listener per round, each on a port of its own: a connect pending for
    seconds is pending on its own round's listener, not on every later round's."""
    for act in tl.actions:
        if act.name == "listen" and act.id == listener and act.params.get("port") is not None:
            return int(act.params["port"])
    return None


def _pending_rejected(tl: Timeline, destroy: Action) -> Iterator[Finding]:
    for conn_act in pending_at(tl, destroy):
        got = replies(tl, conn_act.id)
        if not got:
            continue  # a missing reply is invariant 1's
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
        # Only a close that came before the DISCONNECTED explains it: the test's own close
        # after it succeeds on an id that is already closed (rdma_disconnect is idempotent).
        lost = [
            e
            for e in tl.events
            if e.id in ids
            and e.type == "DISCONNECTED"
            and e.t_us >= destroy.t_us
            and not staysup.explained(tl, e)
        ]
        if lost:
            yield Finding(
                f"accepted {acc.id} was disconnected when listener {destroy.id} was destroyed",
                tuple(lost),
                (destroy, acc),
            )


@rule(
    "listener-destroy-bounded",
    6,
    "rdma_destroy_id on a listener returns within the provider's bound, requests "
    "pending on it included (siw at once; cxgb4 once the firmware acknowledges)",
    "[src] siw_cm.c siw_destroy_listen, siw_reject; cxgb4 cm.c destroy_listen, "
    "C4IW_WR_TO 60 s; the 2006 openib thread: destroy_listen blocks until the RNIC acks",
)
def _listener_destroy_bounded(tl: Timeline, profile: Profiles) -> Iterator[Finding]:
    for act in (a for a in tl.actions if a.name == "destroy" and a.id in _listeners(tl)):
        bound_us = actor(profile, tl, act).listener_destroy_bound_s * 1e6
        if not act.ok:
            yield Finding(f"destroy of listener {act.id} failed: {act.result}", (), (act,))
        elif act.duration_us is None:
            yield Finding(f"destroy of listener {act.id} has no measured duration", (), (act,))
        elif act.duration_us > bound_us:
            yield Finding(
                f"destroy of listener {act.id} blocked {ms(act.duration_us)}, over "
                f"{ms(bound_us)} ({len(pending_at(tl, act))} requests pending on it)",
                (),
                (act,),
            )


@rule(
    "destroy-in-conn-sent-bounded",
    7,
    "rdma_destroy_id on an id in CONN_SENT blocks, but only until the provider's "
    "connect timeout (siw MPAREQ_TIMEOUT 10 s, cxgb4 ep_timeout_secs); when the peer "
    "never answers it returns no sooner than that timeout after rdma_connect",
    "[src] iwcm.c destroy_cm_id waits for IWCM_F_CONNECT_WAIT; siw_cm.c MPAREQ_TIMEOUT; "
    "[lab] siw 10.3 s after the connect",
)
def _destroy_conn_sent(tl: Timeline, profile: Profiles) -> Iterator[Finding]:
    for act in (a for a in tl.actions if a.name == "destroy" and a.id):
        bound_us = actor(profile, tl, act).conn_sent_destroy_bound_s * 1e6
        connects = [c for c in tl.actions_for(act.id, "connect") if c.ok and c.t_us < act.t_us]
        if not connects or any(e.t_us < act.t_us for e in replies(tl, act.id)):
            continue
        yield from _returned_too_soon(tl, profile, act, connects[-1])
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


def _returned_too_soon(
    tl: Timeline, profile: Profiles, destroy: Action, connect: Action
) -> Iterator[Finding]:
    """A destroy in CONN_SENT that returned before the connect timer could end the
    connect, though the peer never answered: it did not wait for CONNECT_REPLY."""
    floor_s = actor(profile, tl, destroy).conn_sent_destroy_min_s
    if floor_s is None or not destroy.ok or destroy.duration_us is None:
        return
    if _peer_answered(tl, destroy, connect):
        return  # an answer (or the listener's end) may end the wait early
    waited_us = destroy.end_us - connect.t_us
    if waited_us < floor_s * 1e6:
        yield Finding(
            f"destroy of {destroy.id} in CONN_SENT returned {ms(waited_us)} after its "
            f"connect, before the connect timeout could end it ({ms(floor_s * 1e6)}); "
            "the peer never answered",
            (),
            (connect, destroy),
        )


def _peer_answered(tl: Timeline, destroy: Action, connect: Action) -> bool:
    """Whether the peer answered the connect, or ended its listener or the link, before
    the destroy returned (to the pair's clock uncertainty)."""
    conn = tl.conn_of(destroy.id)
    peer_ids = {e.id for e in tl.events_of_conn(conn) if e.side != destroy.side} if conn else set()
    peer_ids |= {e.listen_id for e in tl.events if e.id in peer_ids and e.listen_id}
    until = destroy.end_us + tl.uncertainty_us(*tl.pair)
    for a in tl.actions:
        if a.side == destroy.side or not connect.t_us <= a.t_us <= until:
            continue
        if a.name in ("pull", "restore") or (
            a.name in _ANSWERS and (a.id in peer_ids or not peer_ids)
        ):
            return True
    return False


RULES = (
    _no_event_after_destroy,
    _listener_destroy,
    _listener_destroy_bounded,
    _destroy_conn_sent,
)
