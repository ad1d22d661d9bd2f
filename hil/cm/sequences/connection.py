"""A connection's life: connect, an orderly or abortive close, a reject, a connect
with no listener, and a remote access error that ends the connection."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hil.cm import qpstate, steps
from hil.cm.endpoint import Endpoint
from hil.cm.registry import sequence
from hil.cm.sequences.common import BYS, choice, open_conn
from hil.cm.steps import Conn, waits
from hil.errors import InputError
from hil.judge.access import ACCESS_ERRORS
from hil.judge.timeline import Timeline

if TYPE_CHECKING:
    from hil.cm.sides import PairSides

ABORTS = ("qp_err", "destroy", "kill")
BUFFER_BYTES = 65536  # every QP's registered buffer (CMChannel.create_qp)


@sequence
def connect(s: PairSides, private_data: bytes = b"hil") -> Timeline:
    """Connect, then close orderly from the active side."""
    with s.recording("connect") as rec:
        conn = open_conn(rec, private_data=private_data)
        steps.close(conn, "active")
        steps.teardown(conn)
    return rec.timeline()


@sequence
def close(s: PairSides, by: str = "active") -> Timeline:
    """Connect, then close orderly from side ``by``; both see DISCONNECTED."""
    choice("by", by, BYS)
    with s.recording(f"close-{by}") as rec:
        conn = open_conn(rec)
        # SENDs completed before the close reach the peer before its DISCONNECTED.
        with steps.last_sends(conn, by, waits(s).close_s):
            out = steps.close(conn, by)
        last = max(e.t_us for e in rec.events() if e.type == "DISCONNECTED")
        rec.metric("close_us", last - out.action.t_us)
        steps.teardown(conn)
    return rec.timeline()


@sequence
def abort(s: PairSides, how: str = "qp_err", by: str = "active") -> Timeline:
    """Connect, then close abortively from side ``by``: QP to ERR, destroy, or SIGKILL."""
    choice("how", how, ABORTS)
    choice("by", by, BYS)
    with s.recording(f"abort-{how}-{by}") as rec:
        conn = open_conn(rec)
        ep, cm_id = conn.end(by)
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
            # The receives open_conn left posted: each flushed once (abort-flushes).
            ep.flushed(cm_id)
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
def remote_access_error(s: PairSides, how: str = "bad_rkey", length: int = 64) -> Timeline:
    """RDMA WRITE to the peer with a wrong rkey or past its buffer's end; both sides close."""
    choice("how", how, ACCESS_ERRORS)
    if not 1 <= length <= BUFFER_BYTES:
        raise InputError(f"length must be 1..{BUFFER_BYTES}, not {length}")
    with s.recording(f"remote-access-{how}") as rec:
        conn = open_conn(rec)
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
