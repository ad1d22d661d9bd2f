"""Private data at its length boundaries: one call (connect, accept or reject) given
``length`` bytes, the other calls none, on one connection.

A call the provider refuses (a length past its limit) is recorded with its errno
and the sequence cleans up without raising: the contract judges the refusal
(``pdata-over-limit-refused``) and the delivery of what was accepted
(``connect-pdata-delivered``, ``accept-pdata-delivered``, ``reject-status``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hil.cm import steps
from hil.cm.endpoint import Endpoint, Outcome
from hil.cm.registry import sequence
from hil.cm.sequences.common import choice
from hil.cm.steps import Listener, waits
from hil.errors import InputError
from hil.judge.timeline import Event, Timeline

if TYPE_CHECKING:
    from hil.cm.recording import Recording
    from hil.cm.sides import PairSides

PDATA_CALLS = ("connect", "accept", "reject")
# Longer than anything rdma_cm carries (its length is a uint8_t): a bound on bad input.
PDATA_MAX_ASKED = 256


def pattern(length: int) -> bytes:
    """``length`` bytes, none zero and no two neighbours alike: a lost, added or
    shifted byte changes what the receiver compares."""
    return bytes((i * 37 + 11) % 255 + 1 for i in range(length))


@sequence
def private_data(s: PairSides, call: str = "connect", length: int = 0) -> Timeline:
    """One connection whose ``call`` (connect/accept/reject) carries ``length`` bytes of
    private data (:func:`pattern`); a refused call ends it, cleaned up."""
    choice("call", call, PDATA_CALLS)
    if not 0 <= length <= PDATA_MAX_ASKED:
        raise InputError(f"length must be 0..{PDATA_MAX_ASKED}, not {length}")
    data = pattern(length)
    with s.recording(f"pdata-{call}-{length}") as rec:
        listener = steps.listen(rec, s.passive)
        active = rec.endpoint(s.active)
        if call == "connect":
            _connect(rec, active, listener, data)
        else:
            _answer(rec, active, listener, call, data)
        steps.destroy(listener.ep, listener.id)
    return rec.timeline()


def _connect(rec: Recording, active: Endpoint, listener: Listener, data: bytes) -> None:
    """rdma_connect with ``data``; when it is taken, accepted with none and closed."""
    out = steps.start_connect(rec, active, listener, data)
    if not out.ok:
        steps.destroy(active, out.id)  # refused: no event may follow (invariant 1)
        return
    req = steps.expect(listener.ep, "CONNECT_REQUEST", None, "connect c1")
    rec.label("c1", out.id, req.id)
    acc = listener.ep.accept(req.id, b"")
    _finish(active, listener, out, req, acc)


def _answer(rec: Recording, active: Endpoint, listener: Listener, call: str, data: bytes) -> None:
    """A connect with no private data, answered by ``call`` with ``data``."""
    conn, req = steps.request(rec, active, listener, "c1", b"")
    if call == "accept":
        _finish(active, listener, conn, req, listener.ep.accept(req.id, data))
        return
    out = listener.ep.reject(req.id, data)
    if not out.ok:
        steps.destroy(listener.ep, req.id)  # refused: the destroy rejects it instead
    active.wait(steps.REPLY_TYPES, conn.id, waits(rec.session).reply_s)
    listener.ep.collect(0.2)  # an event after rdma_reject would be a violation: catch it
    steps.destroy(active, conn.id)
    steps.destroy(listener.ep, req.id)


def _finish(active: Endpoint, listener: Listener, conn: Outcome, req: Event, acc: Outcome) -> None:
    """An accepted request connected, closed and torn down; a refused accept's request
    destroyed (the peer gets REJECTED) and both ids with it."""
    if acc.ok:
        c = steps.accepted(active, listener, "c1", conn, req, acc)
        steps.payload(c)
        steps.close(c, "active")
        steps.teardown(c)
        return
    steps.destroy(listener.ep, req.id)
    active.wait(steps.REPLY_TYPES, conn.id, waits(active.rec.session).reply_s)
    steps.destroy(active, conn.id)
