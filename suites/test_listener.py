"""Listener destroy with connect requests pending, and ids already accepted.

Parameters: ``direction`` and ``(pending, accepted)``: how many connects
are left unretrieved on the listener and how many were accepted before it
is destroyed.  The contract judges ``listener-destroy-rejects-pending``
(pending requests are REJECTED, accepted ids stay connected),
``listener-destroy-bounded`` (the destroy returns within the profile's
bound) and ``no-event-after-destroy`` (nothing arrives through the destroyed
listener); the tests add that every pending connect got its answer and
every accepted connection closed orderly afterwards.  A run in which the
paused channel did not hold every request pending at the destroy (one was
retrieved or answered first) fails as "scenario not reached": the rule
would have judged fewer pending requests than the test claims.
"""

from __future__ import annotations

import pytest

from hil.cm import sequences
from hil.cm.session import CMSession
from hil.judge.destroys import pending_at
from hil.plugin.api import Contract, explain, seen


@pytest.mark.parametrize(
    ("pending", "accepted"), [(2, 1), (3, 0)], ids=["2-pending-1-accepted", "3-pending"]
)
def test_listener_destroy_rejects_pending_and_keeps_accepted(
    cm: CMSession, contract: Contract, pending: int, accepted: int
) -> None:
    """Pending requests end (REJECTED), accepted connections survive the listener."""
    tl = cm.run(sequences.listener_destroy, pending=pending, accepted=accepted)
    contract(tl)
    listener = next(a.id for a in tl.actions if a.name == "listen")
    destroy = next((a for a in tl.actions if a.name == "destroy" and a.id == listener), None)
    assert destroy is not None, explain(tl, "the listener was never destroyed")
    held = pending_at(tl, destroy)
    assert len(held) == pending, explain(
        tl,
        f"scenario not reached: {len(held)} of {pending} connects were pending on the "
        "listener when it was destroyed (the paused channel did not hold the others)",
    )
    for i in range(pending):
        replies = [
            e
            for e in tl.events
            if e.conn == f"p{i}"
            and e.side == cm.active
            and e.type in ("ESTABLISHED", "REJECTED", "UNREACHABLE", "CONNECT_ERROR")
        ]
        assert len(replies) == 1, explain(tl, f"pending connect p{i} got no single reply")
    for i in range(accepted):
        closes = [e for e in tl.events if e.conn == f"c{i}" and e.type == "DISCONNECTED"]
        assert len(closes) == 2, explain(
            tl, f"accepted connection c{i} should outlive the listener and close on both sides"
        )
    assert "destroy_blocked_us" in tl.metrics, explain(tl, "the listener destroy did not complete")
    assert len(seen(tl, "ESTABLISHED")) >= 2 * accepted, explain(tl, "accepts did not establish")
