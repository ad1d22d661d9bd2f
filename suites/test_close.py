"""Orderly close: rdma_disconnect by either side, and its idempotence.

Parameters: ``direction`` (which host connects) and ``by`` (which end of the
connection calls rdma_disconnect).  The contract judges the statuses and the
initiator's close time (``close-status``, ``disconnect-completes-within``,
``disconnect-once-after-established``); the tests add that both sides did
see their DISCONNECTED.
"""

from __future__ import annotations

import pytest

from hil.cm import sequences, steps
from hil.cm.session import CMSession
from hil.judge.profiles import Profiles
from hil.plugin.api import Contract, explain, seen


@pytest.mark.parametrize("by", ["active", "passive"])
def test_orderly_close_disconnects_both_sides(
    cm: CMSession, contract: Contract, profile: Profiles, by: str
) -> None:
    """rdma_disconnect by ``by``: one DISCONNECTED per side, with an orderly status."""
    tl = cm.run(sequences.close, by=by)
    contract(tl)
    for side in (cm.active, cm.passive):
        got = seen(tl, "DISCONNECTED", side)
        assert len(got) == 1, explain(tl, f"expected one DISCONNECTED on side {side}")
        own = profile.of(got[0].host)  # each side's status is its own driver's
        assert got[0].status in own.orderly_close_statuses, explain(
            tl,
            f"DISCONNECTED status {got[0].status} on side {side}; profile {own.name} "
            f"allows {sorted(own.orderly_close_statuses)} for an orderly close",
        )
    assert "close_us" in tl.metrics, explain(tl, "no close time measured")


@pytest.mark.parametrize("direction", ["a-b"])
def test_disconnect_again_after_close_returns_0(cm: CMSession, contract: Contract) -> None:
    """Invariant 7: rdma_disconnect on an id already closed (CLOSING/IDLE) returns 0;
    invariant 4: rdma_reject on the closed passive id fails EINVAL
    (``answer-on-closed-id-fails``)."""
    with cm.recording("disconnect-twice") as rec:
        listener = steps.listen(rec, cm.passive)
        conn = steps.establish(rec, rec.endpoint(cm.active), listener, "c1")
        steps.destroy(listener.ep, listener.id)
        steps.close(conn, "active")
        again_active = conn.active.disconnect(conn.active_id)
        again_passive = conn.passive.disconnect(conn.passive_id)
        late_reject = conn.passive.reject(conn.passive_id, b"too-late")
        steps.teardown(conn)
    tl = rec.timeline()
    contract(tl)
    assert again_active.ok and again_passive.ok, explain(
        tl,
        "a second rdma_disconnect failed: "
        f"{again_active.action.brief()}; {again_passive.action.brief()}",
    )
    assert len(seen(tl, "DISCONNECTED")) == 2, explain(tl, "expected one DISCONNECTED per side")
    assert not late_reject.ok, explain(tl, "rdma_reject on a closed id succeeded")
