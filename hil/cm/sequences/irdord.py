"""IRD/ORD negotiation on one connection: the active side connects asking ``ird`` and
``ord``, the passive side accepts with ``accept_ird`` and ``accept_ord``.

Once both sides are ESTABLISHED each QP's RDMA READ depths are read
(``query_qp``), then the active side issues as many concurrent RDMA READs as its
ESTABLISHED reports for its ORD, each checked byte for byte, then one more
than that (past the ORD: the profile says what happens); then the connection
is closed.  A call the stack refuses (a value past the device's maximum) is
recorded with its errno and the sequence cleans up without raising: the
contract's ``ird-ord-*`` rules judge it all (:mod:`hil.judge.irdord`,
docs/ird-ord.md).
"""

from __future__ import annotations

import zlib
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from hil.cm import steps
from hil.cm.registry import sequence
from hil.cm.steps import Conn, waits
from hil.errors import InputError
from hil.judge.irdord import MAX_ASK, reported
from hil.judge.timeline import Timeline

if TYPE_CHECKING:
    from hil.cm.endpoint import Outcome
    from hil.cm.sides import PairSides

# The most READs one ``reads`` op posts at once: the send queue of a CM worker's QP
# (hil/agent/remote/cm/stream.py QP_DEPTH), the past-the-ORD READ included.
READS_MAX = 16


@sequence
def ird_ord(
    s: PairSides, ird: int = 1, ord: int = 1, accept_ird: int = 1, accept_ord: int = 1
) -> Timeline:
    """One connection asking IRD/ORD ``ird``/``ord``, accepted with ``accept_ird`` /
    ``accept_ord`` (255: the device's maximum); its QPs' depths read and its
    concurrent RDMA READs checked; a refused call ends it, cleaned up."""
    asked = {"ird": ird, "ord": ord, "accept_ird": accept_ird, "accept_ord": accept_ord}
    for name, value in asked.items():
        if not 0 <= value <= MAX_ASK:
            raise InputError(f"{name} must be 0..{MAX_ASK} (a uint8_t), not {value}")
    with s.recording(f"ird-ord-{ird}-{ord}-{accept_ird}-{accept_ord}") as rec:
        listener = steps.listen(rec, s.passive)
        active = rec.endpoint(s.active)
        out = steps.start_connect(rec, active, listener, b"hil", depths=(ird, ord))
        if out.ok:
            req = steps.expect(listener.ep, "CONNECT_REQUEST", None, "connect c1")
            rec.label("c1", out.id, req.id)
            acc = listener.ep.accept(req.id, b"hil-ok", accept_ird, accept_ord)
            if acc.ok:
                conn = steps.accepted(active, listener, "c1", out, req, acc)
                _exercise(s, conn)
                steps.close(conn, "active")
                steps.teardown(conn)
            else:  # refused: the request's destroy rejects it (the peer gets REJECTED)
                steps.destroy(listener.ep, req.id)
                active.wait(steps.REPLY_TYPES, out.id, waits(rec.session).reply_s)
        steps.destroy(active, out.id)
        steps.destroy(listener.ep, listener.id)
    return rec.timeline()


def _exercise(s: PairSides, conn: Conn) -> None:
    """Read both QPs' depths, then the active side's READs within and past its ORD."""
    conn.active.query_qp(conn.active_id)
    conn.passive.query_qp(conn.passive_id)
    est = next(
        e for e in conn.active.rec.events() if e.id == conn.active_id and e.type == "ESTABLISHED"
    )
    promise = s.profile.of(conn.active.host).ird_ord
    depths = reported(est, promise) if promise else None
    ord_ = depths[1] if depths else est.initiator_depth or 0
    for count in (ord_, ord_ + 1):
        if 0 < count <= READS_MAX and ord_ > 0:  # ORD 0: no READ may be issued at all
            reads(conn, count)


def reads(conn: Conn, count: int) -> tuple[Outcome, Outcome]:
    """``count`` concurrent RDMA READs by the active side of the passive side's buffer,
    both ends at once (the agent's ``reads`` op); the reader's checks are its ``reads``
    action.  The pattern's seed is the label's and the count's."""
    seed = zlib.crc32(f"{conn.label}-{count}".encode()) & 0xFFFF
    with ThreadPoolExecutor(2, thread_name_prefix="reads") as pool:
        active = pool.submit(conn.active.reads, conn.active_id, True, conn.passive_qp, count, seed)
        passive = pool.submit(
            conn.passive.reads, conn.passive_id, False, conn.active_qp, count, seed
        )
        return active.result(), passive.result()
