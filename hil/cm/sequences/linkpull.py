"""Pulling the pair's link: idle or under traffic, detection, restore, reconnect."""

from __future__ import annotations

import time
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING

from hil.cm import asyncwatch, steps
from hil.cm.asyncwatch import AsyncWatch
from hil.cm.clock import controller_us
from hil.cm.registry import sequence
from hil.cm.sequences.common import open_conn
from hil.cm.steps import Conn, StepFailed, step_slack_s
from hil.errors import InputError
from hil.judge.timeline import Timeline

if TYPE_CHECKING:
    from hil.cm.recording import Recording
    from hil.cm.sides import PairSides

WATCH_MARGIN_S = 2.0  # an admin pull's async watch outlasts the profile's bound by this


@sequence
def link_pull(
    s: PairSides, mode: str | None = None, traffic: bool = False, hold_s: float = 5.0
) -> Timeline:
    """Pull the pair's link (idle or under traffic), wait for detection, restore, reconnect."""
    modes = s.pull_modes()
    mode = mode or (modes[0] if modes else "")
    if mode not in modes:
        raise InputError(
            f"link {s.pair.name} offers no {mode!r} pull (offers: {', '.join(modes) or 'none'})"
        )
    lc = s.link_control()
    pull = s.pair.link.pull(mode)  # type: ignore[arg-type]
    side = s.side_of(pull.end.host) if pull.end else "a"
    # The contract knows two kinds: the host sees its link go down (admin) or not.
    kind = "admin" if mode == "admin" else "carrier"
    bound = s.profile.link_pull_bound_s(kind, traffic)
    with s.recording(f"link-pull-{mode}{'-traffic' if traffic else ''}") as rec:
        conn = open_conn(rec)
        if traffic:
            _start_traffic(conn)
        with _port_watch(rec, side, kind, bound):
            start = controller_us()
            lc.pull(s.pair.link, mode)
            rec.controller_action(side, "pull", start, mode=kind, method=mode, traffic=traffic)
            found = steps.wait_disconnected(
                conn, bound + step_slack_s() if bound else hold_s, ("active",)
            )
        if found["active"] is None:
            found = steps.wait_disconnected(conn, 1.0, ("passive",))
        hit = next((e for e in found.values() if e is not None), None)
        if hit is not None:
            rec.metric("detection_us", hit.t_us - start)
        start = controller_us()
        lc.restore(s.pair.link, mode)
        rec.controller_action(side, "restore", start, mode=kind, method=mode)
        if traffic:
            rec.metric("traffic_ops", _stop_traffic(conn))
        _drop(conn)
        s.refresh_offsets()  # a pull may have held a guest's clock: measure again
        again = open_conn(rec, "c2", metric="reconnect_us")
        steps.close(again, "active")
        steps.teardown(again)
    return rec.timeline()


def _port_watch(
    rec: Recording, side: str, kind: str, bound: float | None
) -> AbstractContextManager[object]:
    """Watch the pulled host's async events when its profile promises a port event for an
    admin pull (``admin-down-port-error`` judges what it saw), else nothing."""
    promised = rec.session.profile.of(rec.session.host(side)).admin_down_port_event
    if kind != "admin" or not promised:
        return nullcontext()
    return AsyncWatch(rec, side, asyncwatch.OPEN_S + (bound or 0.0) + WATCH_MARGIN_S)


def _start_traffic(conn: Conn) -> None:
    remote = {k: conn.passive_qp[k] for k in ("addr", "rkey")}
    out = conn.active.stream_start(conn.active_id, "write", remote=remote)
    if not out.ok:
        raise StepFailed(conn.active.host, f"traffic on {conn.label}: {out.action.result}")
    time.sleep(0.5)  # let data be in flight before the pull


def _stop_traffic(conn: Conn) -> int:
    return int(conn.active.stream_stop(conn.active_id).get("ops", 0))


def _drop(conn: Conn) -> None:
    """Close what is left of a connection after a pull: disconnect (idempotent), destroy."""
    pending = []
    for which, ep, cm_id in (
        ("active", conn.active, conn.active_id),
        ("passive", conn.passive, conn.passive_id),
    ):
        ep.disconnect(cm_id)
        if not any(e.id == cm_id and e.type == "DISCONNECTED" for e in ep.rec.events()):
            pending.append(which)
    steps.wait_disconnected(conn, 3.0, pending)
    steps.teardown(conn)
