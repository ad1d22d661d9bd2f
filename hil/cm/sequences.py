"""The built-in CM sequences: each runs on a pair's sides and returns a Timeline.

Each registers itself under its name (:func:`hil.cm.registry.sequence`):
``session.run(name, **params)`` on a :class:`~hil.cm.session.CMSession`, or
``SEQUENCES[name](sides, **params) -> Timeline`` (:data:`hil.cm.registry.SEQUENCES`)
on any :class:`~hil.cm.sides.PairSides`.  "active" and "passive" follow the
session's direction.  Every sequence destroys what it made and closes its
endpoints; its timeline carries both hosts' events, the controller's
actions, the clock offsets, the resource counts before/after, the kernel log
and ``metrics`` (µs unless named otherwise).

Each, with its parameters, its steps and the metrics it records:

- ``connect`` (``private_data``): listen, connect, accept, ESTABLISHED both,
  close by active. Metrics: ``connect_us``.
- ``close`` (``by`` = active/passive): connect, rdma_disconnect by ``by``,
  DISCONNECTED both. Metrics: ``connect_us``, ``close_us``.
- ``abort`` (``how`` = qp_err/destroy/kill, ``by``): connect, abortive close,
  peer DISCONNECTED. Metrics: ``detection_us``.
- ``reject`` (``private_data``): listen, connect, rdma_reject with data,
  REJECTED. Metrics: ``reject_us``.
- ``no_listener``: connect to a port nobody listens on.
- ``link_pull`` (``mode``, ``traffic``, ``hold_s``): connect, (traffic), pull,
  wait DISCONNECTED or hold, restore, reconnect. Metrics: ``detection_us``,
  ``traffic_ops``, ``reconnect_us``.
- ``destroy_conn_sent`` (``order`` = qp_first/id_first): listener never
  answers, connect, destroy in CONN_SENT (a host-side script). Metrics:
  ``destroy_blocked_us``, ``qp_destroy_us`` (id_first: the QP's after the id's).
- ``listener_destroy`` (``pending``, ``accepted``): accept some, leave others
  unretrieved, destroy the listener. Metrics: ``destroy_blocked_us``.
- ``remote_access_error`` (``how`` = bad_rkey/past_end, ``length``): connect, one
  signaled RDMA WRITE by the active side with a wrong rkey or one byte past the
  end of the peer's buffer (action ``write``: its completion's ``wc_status``),
  DISCONNECTED both. Metrics: ``detection_us``.
"""

from __future__ import annotations

import time
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING

from hil.agent.remote import protocol as wire
from hil.cm import asyncwatch, qpstate, steps
from hil.cm.asyncwatch import AsyncWatch
from hil.cm.clock import controller_us
from hil.cm.endpoint import Endpoint
from hil.cm.races.conns import dial
from hil.cm.registry import sequence
from hil.cm.scenario import Script, Step, run
from hil.cm.steps import Conn, Listener, StepFailed, step_slack_s, waits
from hil.errors import InputError
from hil.judge.access import ACCESS_ERRORS
from hil.judge.timeline import Timeline

if TYPE_CHECKING:
    from hil.cm.recording import Recording
    from hil.cm.sides import PairSides
ABORTS = ("qp_err", "destroy", "kill")
BYS = ("active", "passive")
# The worker's poller reads with a 100 ms poll: let one under way finish.
PAUSE_SETTLE_S = 0.5
# Time for connects' MPA requests to reach the passive kernel, unretrieved.
ARRIVE_S = 1.0
BUFFER_BYTES = 65536  # every QP's registered buffer (CMChannel.create_qp)
# After a destroy in CONN_SENT returned, before the passive side's late accept (the
# contract's rule takes the close to have arrived 1 s after the destroy returned).
LATE_ACCEPT_S = 1.5
# On the host, from rdma_connect's return (its MPA request sent) to the destroy in CONN_SENT.
DESTROY_AFTER_US = 200_000
WATCH_MARGIN_S = 2.0  # an admin pull's async watch outlasts the profile's bound by this


def _choice(name: str, value: str, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise InputError(f"{name} must be one of {', '.join(allowed)}, not {value!r}")
    return value


def _open_conn(
    rec: Recording, label: str = "c1", private_data: bytes = b"hil", metric: str = "connect_us"
) -> Conn:
    s = rec.session
    listener = steps.listen(rec, s.passive)
    conn = steps.establish(rec, rec.endpoint(s.active), listener, label, private_data)
    rec.metric(metric, conn.established_us - conn.connect.action.t_us)
    steps.destroy(listener.ep, listener.id)
    return conn


@sequence
def connect(s: PairSides, private_data: bytes = b"hil") -> Timeline:
    """Connect, then close orderly from the active side."""
    with s.recording("connect") as rec:
        conn = _open_conn(rec, private_data=private_data)
        steps.close(conn, "active")
        steps.teardown(conn)
    return rec.timeline()


@sequence
def close(s: PairSides, by: str = "active") -> Timeline:
    """Connect, then close orderly from side ``by``; both see DISCONNECTED."""
    _choice("by", by, BYS)
    with s.recording(f"close-{by}") as rec:
        conn = _open_conn(rec)
        out = steps.close(conn, by)
        last = max(e.t_us for e in rec.events() if e.type == "DISCONNECTED")
        rec.metric("close_us", last - out.action.t_us)
        steps.teardown(conn)
    return rec.timeline()


@sequence
def abort(s: PairSides, how: str = "qp_err", by: str = "active") -> Timeline:
    """Connect, then close abortively from side ``by``: QP to ERR, destroy, or SIGKILL."""
    _choice("how", how, ABORTS)
    _choice("by", by, BYS)
    with s.recording(f"abort-{how}-{by}") as rec:
        conn = _open_conn(rec)
        ep, cm_id = (
            (conn.active, conn.active_id) if by == "active" else (conn.passive, conn.passive_id)
        )
        peer = "passive" if by == "active" else "active"
        if how == "qp_err":
            start = ep.qp_err(cm_id).action.t_us
        elif how == "destroy":
            start = ep.destroy(cm_id).action.t_us
        else:
            start = ep.kill((cm_id,)).t_us
        # The peer's DISCONNECTED follows the abort's RST, TERMINATE or FIN: a close.
        got = steps.wait_disconnected(conn, waits(s).close_s, (peer,))[peer]
        if got is not None:
            rec.metric("detection_us", got.t_us - start)
        if how == "qp_err":
            steps.wait_disconnected(conn, waits(s).close_s, (by,))
        # Invariant 9: each QP whose id is still alive is held, in ERR, until destroyed.
        for end in (peer, by) if how == "qp_err" else (peer,):
            ep, cm_id, qpn = _side_qp(conn, end)
            qpstate.record(rec, ep, cm_id, qpn, s.rnic(ep.side).rdma_device)
        steps.teardown(conn)
    return rec.timeline()


def _side_qp(conn: Conn, end: str) -> tuple[Endpoint, str, int]:
    """One end's endpoint, cm_id and QP number (``end``: active or passive)."""
    if end == "active":
        return conn.active, conn.active_id, conn.active_qp["qp_num"]
    return conn.passive, conn.passive_id, conn.passive_qp["qp_num"]


@sequence
def reject(s: PairSides, private_data: bytes = b"no thanks") -> Timeline:
    """The passive side rejects with private data; the active side gets REJECTED."""
    with s.recording("reject") as rec:
        listener = steps.listen(rec, s.passive)
        active = rec.endpoint(s.active)
        conn, req = steps.request(rec, active, listener, "c1", what="reject")
        out = listener.ep.reject(req.id, private_data)
        got = active.wait(steps.REPLY_TYPES, conn.id, waits(s).reply_s)
        if got is not None:
            rec.metric("reject_us", got.t_us - out.action.t_us)
        listener.ep.collect(0.2)  # an event after rdma_reject would be a violation: catch it
        steps.destroy(active, conn.id)
        steps.destroy(listener.ep, req.id, listener.id)
    return rec.timeline()


@sequence
def no_listener(s: PairSides) -> Timeline:
    """Connect to a port nobody listens on; siw: ECONNREFUSED from rdma_connect, no event."""
    with s.recording("no-listener") as rec:
        active = rec.endpoint(s.active)
        port = s.port()
        conn = active.connect(s.address(s.passive), port, src=s.address(s.active), listener=False)
        if conn.id is not None:
            active.collect(1.0, steps.REPLY_TYPES, conn.id)  # any event would be recorded
            steps.destroy(active, conn.id)
    return rec.timeline()


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
        conn = _open_conn(rec)
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
        again = _open_conn(rec, "c2", metric="reconnect_us")
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


@sequence
def destroy_conn_sent(s: PairSides, order: str = "qp_first") -> Timeline:
    """Connect to a listener that never answers; destroy the active id in CONN_SENT; then
    the passive side accepts the request its peer gave up (it must fail ECONNRESET).

    ``order``: ``qp_first`` destroys the QP, then the id (as rdma_cm
    applications do: on siw the QP's destroy is what blocks); ``id_first``
    the id while its QP still exists (iw_cm's own wait for the connect's
    reply), then the QP.  The connect and the destroy run in one host-side
    script, the destroy DESTROY_AFTER_US after rdma_connect returned: [lab]
    issued from the controller after the passive's CONNECT_REQUEST, it came
    after the 10 s MPA timer had ended the connect on a loaded machine.
    """
    how = _choice("order", order, wire.DESTROY_ORDERS)
    bound = s.profile.of(s.host(s.active)).conn_sent_destroy_bound_s  # the destroying host's
    with s.recording("destroy-conn-sent") as rec:
        listener = steps.listen(rec, s.passive)
        active = rec.endpoint(s.active)
        script = Script(
            (
                Step("connect", name="c", params=dial(rec, listener, "hil")),
                Step("destroy", id_of="c", after_us=DESTROY_AFTER_US, params={"order": how}),
            ),
            deadline_s=bound + step_slack_s(),
        )
        connect, destroy = run(active, script).steps
        if not connect.ok or connect.id is None:
            raise StepFailed(active.host, f"connect to port {listener.port}: {connect.result}")
        if destroy.ok and destroy.us is not None:
            rec.metric("destroy_blocked_us", destroy.us)
        if "qp_us" in destroy.reply:
            rec.metric("qp_destroy_us", destroy.reply["qp_us"])
        req = steps.expect(listener.ep, "CONNECT_REQUEST", None, "destroy in CONN_SENT")
        rec.label("c1", connect.id, req.id)
        # Invariant 4 (accept-after-peer-abort-fails): the destroy returned once the
        # provider gave the connect up and closed it; the peer's close reaches the
        # passive host well within LATE_ACCEPT_S.
        time.sleep(LATE_ACCEPT_S)
        listener.ep.accept(req.id, b"too-late")
        steps.destroy(listener.ep, req.id, listener.id)
    return rec.timeline()


@sequence
def listener_destroy(s: PairSides, pending: int = 2, accepted: int = 1) -> Timeline:
    """Destroy a listener holding unretrieved requests: they are REJECTED; accepted ids live.

    [lab] A poll already under way when the listener's endpoint is paused can
    still retrieve a request meant to stay pending, so the pause settles
    before the connects, and any request retrieved after all is tied to its
    connect by the private data it carried.
    """
    with s.recording("listener-destroy") as rec:
        listener = steps.listen(rec, s.passive)
        active = rec.endpoint(s.active)
        conns = [steps.establish(rec, active, listener, f"c{i}") for i in range(accepted)]
        listener.ep.pause(True)
        time.sleep(PAUSE_SETTLE_S)
        tries = [
            steps.start_connect(rec, active, listener, f"hil-p{i}".encode()) for i in range(pending)
        ]
        for i, t in enumerate(tries):
            rec.label(f"p{i}", t.id)
        time.sleep(ARRIVE_S)
        out = listener.ep.destroy(listener.id, timeout=waits(s).destroy_s)
        if out.action.duration_us is not None:
            rec.metric("destroy_blocked_us", out.action.duration_us)
        listener.ep.pause(False)
        for t in tries:
            if t.ok and t.id:
                active.wait(steps.REPLY_TYPES, t.id, waits(s).reply_s)
        _label_retrieved_requests(rec, listener, pending)
        for c in conns:
            steps.close(c, "active")
            steps.teardown(c)
        steps.destroy(active, *(t.id for t in tries))
        steps.destroy(listener.ep, *listener.ep.handles())
    return rec.timeline()


def _label_retrieved_requests(rec: Recording, listener: Listener, pending: int) -> None:
    """Tie any passive request that was retrieved after all to its connect's label."""
    listener.ep.collect(0.3)
    for e in rec.events():
        if e.type != "CONNECT_REQUEST" or e.side != listener.ep.side:
            continue
        for i in range(pending):
            if e.private_bytes.startswith(f"hil-p{i}".encode()):
                rec.label(f"p{i}", e.id)


@sequence
def remote_access_error(s: PairSides, how: str = "bad_rkey", length: int = 64) -> Timeline:
    """RDMA WRITE to the peer with a wrong rkey or past its buffer's end; both sides close."""
    _choice("how", how, ACCESS_ERRORS)
    if not 1 <= length <= BUFFER_BYTES:
        raise InputError(f"length must be 1..{BUFFER_BYTES}, not {length}")
    with s.recording(f"remote-access-{how}") as rec:
        conn = _open_conn(rec)
        peer = conn.passive_qp
        if how == "bad_rkey":
            # The same MR index with another key byte (an STag is index << 8 | key
            # on siw and cxgb4): it names the peer's MR, and no MR accepts it.
            addr, rkey = peer["addr"], peer["rkey"] ^ 0xFF
        else:
            addr, rkey = peer["addr"] + peer["length"], peer["rkey"]
        out = conn.active.write(conn.active_id, addr, rkey, length, how=how)
        got = steps.wait_disconnected(conn, waits(s).close_s)
        first = min((e.t_us for e in got.values() if e is not None), default=None)
        if first is not None:
            rec.metric("detection_us", first - out.action.t_us)
        steps.teardown(conn)
    return rec.timeline()
