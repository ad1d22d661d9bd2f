"""The contract's rules about closing a connection (invariants 3, 7 and 9 of docs/contract.md).

At most one DISCONNECTED per id and only after its ESTABLISHED; a repeated
rdma_disconnect returns 0; after an abortive close the QP stays held, in
ERR, until its id is destroyed.
"""

from __future__ import annotations

from collections.abc import Iterator

from hil.judge.profiles import Profiles
from hil.judge.rule import Finding, actor, rule
from hil.judge.timeline import Action, Timeline

# Abortive closes: the QP goes to ERR (locally, or on the peer by the wire's TERMINATE/RST).
ABORTS = frozenset({"qp_err", "destroy", "kill"})


@rule(
    "disconnect-once-after-established",
    3,
    "At most one DISCONNECTED per cm_id, and only after its ESTABLISHED",
    "[src] iwcm.c cm_close_handler (CLOSE once, from ESTABLISHED/CLOSING)",
)
def disconnect_once(tl: Timeline, profile: Profiles) -> Iterator[Finding]:
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
    "disconnect-idempotent",
    7,
    "rdma_disconnect on an id already closing or closed returns 0",
    "[src] iwcm.c iw_cm_disconnect (CLOSING/IDLE: return 0)",
)
def disconnect_idempotent(tl: Timeline, profile: Profiles) -> Iterator[Finding]:
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
    "qp-err-until-close",
    9,
    "After an abortive close (QP to ERR, the peer's destroy, kill or QP to ERR) a "
    "connection's QP stays held, in ERR, until its id is destroyed: never gone, and "
    "never in another state where the provider reports it (rdma resource show qp)",
    "[src] iwcm.c cm_close_handler drops the QP reference only at CLOSE; siw_qp.c "
    "siw_qp_llp_close moves the QP to ERROR, siw_query_qp reports no state; [lab] siw",
)
def qp_err_until_close(tl: Timeline, profile: Profiles) -> Iterator[Finding]:
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
