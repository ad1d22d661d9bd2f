"""Pulling the pair's link: idle or under traffic, detection, restore, reconnect.

The pull proves itself (:func:`hil.cm.pulls.pulled`); ``detection_us`` counts
only a DISCONNECTED that came after it.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import TYPE_CHECKING

from hil.cm import steps
from hil.cm.pulls import pulled
from hil.cm.registry import sequence
from hil.cm.sequences.common import open_conn
from hil.cm.steps import Conn, StepFailed, step_slack_s
from hil.errors import InputError
from hil.judge.timeline import Event, Timeline

if TYPE_CHECKING:
    from hil.cm.sides import PairSides


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
            start_traffic(conn)
        wait_s = bound + step_slack_s() if bound else hold_s
        with pulled(rec, lc, s.pair.link, mode, side, traffic, wait_s + 1.0) as start:
            found = steps.wait_disconnected(conn, wait_s, ("active",))
            if found["active"] is None:
                found = steps.wait_disconnected(conn, 1.0, ("passive",))
        took = detection_us(found.values(), start)
        if took is not None:
            rec.metric("detection_us", took)
        if traffic:
            rec.metric("traffic_ops", stop_traffic(conn))
        drop_conn(conn)
        s.refresh_offsets()  # a pull may have held a guest's clock: measure again
        again = open_conn(rec, "c2", metric="reconnect_us")
        steps.close(again, "active")
        steps.teardown(again)
    return rec.timeline()


def detection_us(found: Iterable[Event | None], pull_us: int) -> int | None:
    """How long after the pull at ``pull_us`` the first DISCONNECTED of ``found`` came, or
    None: one from before the pull ended the connection by something else, and detects
    nothing."""
    return min(
        (e.t_us - pull_us for e in found if e is not None and e.t_us >= pull_us), default=None
    )


def start_traffic(conn: Conn) -> None:
    """RDMA WRITEs from the active side streaming until :func:`stop_traffic` (the agent's
    stream), with data in flight before this returns."""
    remote = {k: conn.passive_qp[k] for k in ("addr", "rkey")}
    out = conn.active.stream_start(conn.active_id, "write", remote=remote)
    if not out.ok:
        raise StepFailed(conn.active.host, f"traffic on {conn.label}: {out.action.result}")
    time.sleep(0.5)  # let data be in flight before the pull


def stop_traffic(conn: Conn) -> int:
    """Stop the stream :func:`start_traffic` began; how many WRITEs it completed."""
    return int(conn.active.stream_stop(conn.active_id).get("ops", 0))


def drop_conn(conn: Conn) -> None:
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
