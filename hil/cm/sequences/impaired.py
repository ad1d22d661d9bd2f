"""Sequences for impaired paths (issue 27, docs/impairment.md).

``late_mpa_reply``: a connect whose MPA reply a delay impairment (the caller's) holds
past the active side's MPA timer.  ``link_flap``: a link flapping under traffic; the
connection lives through the downs or ends as the flapped host's profile says
(:meth:`hil.judge.profile.Profile.flap_bound_s`).

The flap is an impairment of the active host's path (:mod:`hil.host.impair`: the
port at its impairment point down ``down_s`` every ``every_s``, journaled, proven
by the downs its host reported), recorded on the timeline as a ``flap`` action
(:data:`hil.judge.timeline.FLAP`) with the pull kind the hosts see: ``admin`` when
the port is an end's own (its netdev goes down), ``carrier`` when it is a
middlebox's (the ends' netdevs stay up).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from hil.cm import steps
from hil.cm.clock import controller_us
from hil.cm.registry import sequence
from hil.cm.sequences.common import open_conn
from hil.cm.sequences.linkpull import drop_conn, start_traffic, stop_traffic
from hil.cm.steps import step_slack_s, waits
from hil.errors import InputError
from hil.host.impairkinds import Impairment, check
from hil.judge.timeline import FLAP, Timeline

if TYPE_CHECKING:
    from hil.cm.sides import PairSides


PDATA = b"hil-late-reply"
# rdma_connect on siw blocks in the kernel's TCP connect (siw_connect's kernel_bindconnect,
# Linux 6.1.192) until the SYN-ACK, which a held-back passive host sends that much late.
CONNECT_MARGIN_S = 10.0
# The ends' capture shows a held host's frames only once they left its qdisc: the run
# lasts until the late reply has (accept + the hold + this), for the wire rules to see it.
REPLY_SEEN_S = 1.0


@sequence
def late_mpa_reply(s: PairSides) -> Timeline:
    """Connect and accept while the passive host's frames are held back (a delay
    impairment the caller put on them, :meth:`~hil.cm.sides.PairSides.impaired`):
    the MPA reply reaches the active side after its MPA timer, which ends the connect;
    the passive side's close that follows is waited for, then everything destroyed.
    Metrics: ``mpa_timer_us``, from rdma_connect's return (the MPA request sent and
    the timer armed: siw_cm.c siw_connect) to the active side's reply event."""
    held_s = s.standing_holds().get(s.passive, 0) / 1e6
    bound = s.profile.of(s.host(s.active)).conn_sent_destroy_bound_s
    with s.recording("late-mpa-reply") as rec:
        listener = steps.listen(rec, s.passive)
        active = rec.endpoint(s.active)
        timeout = held_s + CONNECT_MARGIN_S
        conn = active.connect(
            s.address(s.passive), listener.port, s.address(s.active), PDATA, timeout
        )
        if not conn.ok or conn.id is None:
            raise steps.StepFailed(active.host, f"connect: {conn.action.result}")
        req = steps.expect(listener.ep, "CONNECT_REQUEST", None, "late MPA reply")
        rec.label("c1", conn.id, req.id)
        acc = listener.ep.accept(req.id, b"hil-too-late")
        got = active.wait(steps.REPLY_TYPES, conn.id, bound + step_slack_s())
        if got is not None:
            returned = conn.action.t_us + (conn.action.duration_us or 0)
            rec.metric("mpa_timer_us", got.t_us - returned)
        listener.ep.wait("DISCONNECTED", req.id, waits(s).close_s)
        steps.destroy(active, conn.id)
        steps.destroy(listener.ep, req.id, listener.id)
        time.sleep(max(0.0, (acc.action.t_us - controller_us()) / 1e6 + held_s + REPLY_SEEN_S))
    return rec.timeline()


@sequence
def link_flap(s: PairSides, every_s: float = 2.0, down_s: float = 1.0, flaps: int = 3) -> Timeline:
    """A connection carrying traffic (link_pull's stream of WRITEs) while the active
    host's path flaps ``flaps`` times; then, if it lived, its payload checked again
    and an orderly close, else what is left of it dropped; a second connection shows
    the link back.  Metrics: ``traffic_ops``, ``detection_us`` (an ended connection:
    its first DISCONNECTED after the first down as scheduled, which is no later than
    the real one), ``reconnect_us``."""
    flap = check(Impairment("flap", every_s=every_s, down_s=down_s))
    if flaps < 1:
        raise InputError(f"flaps is at least 1, not {flaps}")
    link = s.pair.link
    way = s.way_from(s.active)
    point = s.impair_control().flap_point(link, way)
    ends = {s.host(side): side for side in ("a", "b")}
    kind = "admin" if point.host in ends else "carrier"  # a middlebox's port: not the ends'
    with s.recording("link-flap") as rec:
        conn = open_conn(rec)
        start_traffic(conn)
        start = controller_us()
        with s.impaired(way, [flap]):
            side = ends.get(point.host, s.active)
            rec.controller_action(side, FLAP, start, every_s=every_s, down_s=down_s, mode=kind)
            found = steps.wait_disconnected(conn, flaps * every_s, ("active",))
        rec.metric("traffic_ops", stop_traffic(conn))
        ended = found["active"] or steps.wait_disconnected(conn, 0.1, ("passive",))["passive"]
        if ended is None:
            steps.payload(conn)  # after the flaps: every byte still arrives
            steps.close(conn, "active")
            steps.teardown(conn)
        else:
            rec.metric("detection_us", ended.t_us - start - int((every_s - down_s) * 1e6))
            drop_conn(conn)
        again = open_conn(rec, "c2", metric="reconnect_us")
        steps.close(again, "active")
        steps.teardown(again)
    return rec.timeline()
