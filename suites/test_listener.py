"""Listener destroy with connect requests pending, and ids already accepted.

Parameters: ``direction`` and ``(pending, accepted)``: how many connects
are left unretrieved on the listener and how many were accepted before it
is destroyed.  The contract judges ``listener-destroy-rejects-pending``
(pending requests are REJECTED, accepted ids stay connected) and
``no-event-after-destroy`` (nothing arrives through the destroyed
listener); the tests add that every pending connect got its answer and
every accepted connection closed orderly afterwards.

The scenario is written here with the steps of :mod:`hil.cm.steps` rather
than taken from ``hil.cm.sequences.listener_destroy`` [lab]: there, a poll
already under way when the listener's endpoint is paused can still retrieve
the first "pending" request, and that request's passive id is not tied to
its connection, so the contract took a retrieved request (which correctly
ends UNREACHABLE after siw's MPA timeout) for a pending one.  Here the pause
settles before the connects, and every passive request is labelled by the
private data its connect carried.
"""

from __future__ import annotations

import time

import pytest
from cmsuite import Contract, explain, seen

from hil.cm import steps
from hil.cm.recording import Recording
from hil.cm.session import CMSession
from hil.cm.steps import Listener
from hil.cm.timeline import Timeline

# The worker's poller reads with a 100 ms poll: let one under way finish.
PAUSE_SETTLE_S = 0.5
# Time for the connects' MPA requests to reach the passive kernel, unretrieved.
ARRIVE_S = 1.0


def listener_destroy(cm: CMSession, pending: int, accepted: int) -> Timeline:
    """Accept ``accepted`` connects, leave ``pending`` unretrieved, destroy the listener."""
    with cm.recording("listener-destroy") as rec:
        listener = steps.listen(rec, cm.passive)
        active = rec.endpoint(cm.active)
        conns = [steps.establish(rec, active, listener, f"c{i}") for i in range(accepted)]
        listener.ep.pause(True)
        time.sleep(PAUSE_SETTLE_S)
        tries = [steps.start_connect(rec, active, listener, f"hil-p{i}".encode())
                 for i in range(pending)]
        for i, t in enumerate(tries):
            rec.label(f"p{i}", t.id)
        time.sleep(ARRIVE_S)
        out = listener.ep.destroy(listener.id)
        if out.action.duration_us is not None:
            rec.metric("destroy_blocked_us", out.action.duration_us)
        listener.ep.pause(False)
        for t in tries:
            if t.ok and t.id:
                active.wait(steps.REPLY_TYPES, t.id, steps.REPLY_TIMEOUT)
        _label_requests(rec, listener, pending)
        for c in conns:
            steps.close(c, "active")
            steps.teardown(c)
        steps.destroy(active, *(t.id for t in tries))
        steps.destroy(listener.ep, *listener.ep.handles())
    return rec.timeline()


def _label_requests(rec: Recording, listener: Listener, pending: int) -> None:
    """Tie any passive request that was retrieved after all to its connect's label."""
    listener.ep.collect(0.3)
    for e in rec.events():
        if e.type != "CONNECT_REQUEST" or e.side != listener.ep.side:
            continue
        for i in range(pending):
            if e.private_bytes.startswith(f"hil-p{i}".encode()):
                rec.label(f"p{i}", e.id)


@pytest.mark.parametrize(("pending", "accepted"), [(2, 1), (3, 0)],
                         ids=["2-pending-1-accepted", "3-pending"])
def test_listener_destroy_rejects_pending_and_keeps_accepted(
        cm: CMSession, contract: Contract, pending: int, accepted: int) -> None:
    """Pending requests end (REJECTED), accepted connections survive the listener."""
    tl = listener_destroy(cm, pending, accepted)
    contract(tl)
    for i in range(pending):
        replies = [e for e in tl.events if e.conn == f"p{i}" and e.side == cm.active
                   and e.type in ("ESTABLISHED", "REJECTED", "UNREACHABLE", "CONNECT_ERROR")]
        assert len(replies) == 1, explain(tl, f"pending connect p{i} got no single reply")
    for i in range(accepted):
        closes = [e for e in tl.events if e.conn == f"c{i}" and e.type == "DISCONNECTED"]
        assert len(closes) == 2, explain(
            tl, f"accepted connection c{i} should outlive the listener and close on both sides")
    assert "destroy_blocked_us" in tl.metrics, explain(tl, "the listener destroy did not complete")
    assert len(seen(tl, "ESTABLISHED")) >= 2 * accepted, explain(tl, "accepts did not establish")
