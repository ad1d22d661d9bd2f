"""Connection storms run by the hosts' workers (hil.cm.storm): N connections at the stack's speed.

The active host's processes run every step for all their connections
(resolve, QP, connect, traffic, disconnect, destroy), the passive host's
serve them (accept, destroy on DISCONNECTED); both answer with every step's
host stamps.  The contract judges every connection (one reply each, no
DISCONNECTED before ESTABLISHED, no event after destroy); the tests add that
every connection was established and closed on BOTH sides, and record the
per-step latency percentiles and the rate (docs/storm.md).
"""

from __future__ import annotations

from typing import Any

import pytest

from hil.cm.session import CMSession
from hil.cm.storm import run_storm
from hil.plugin.api import Contract, explain


@pytest.mark.parametrize("count", [16])
def test_storm_connects_and_closes_every_connection(
    cm: CMSession, contract: Contract, hil_metrics: Any, count: int
) -> None:
    """``count`` connections from 2 processes to 2 listeners, 2 SENDs each: all establish,
    and each side of each sees its DISCONNECTED once."""
    tl, result = run_storm(cm, count=count, processes=2, listeners=2, parallel=4, traffic=2)
    contract(tl)
    print(result.table())
    assert not result.failed, explain(tl, "connections failed: " + "; ".join(result.failed))
    assert result.established == count, explain(tl, f"{result.established} of {count} established")
    assert result.closed_active == count, explain(
        tl, f"{result.closed_active} of {count} closed on the active side"
    )
    assert result.closed_passive == count, explain(
        tl, f"{result.closed_passive} of {count} closed on the passive side"
    )
    for side, steps in (("active", result.steps), ("passive", result.passive_steps)):
        for s in steps:
            hil_metrics.percentiles("storm_step_us", s.percentiles(), "us", step=s.step, side=side)
    hil_metrics.record("storm_rate_per_s", result.rate_per_s, "1/s", n=str(count))
    hil_metrics.record("storm_cycle_rate_per_s", result.cycle_rate_per_s, "1/s", n=str(count))


# One direction: it checks the passive host's ucma backlog, and the lab's two guests are alike.
@pytest.mark.parametrize("direction", ["a-b"])
def test_storm_past_the_backlog_is_refused_as_the_backlog_says(
    cm: CMSession, contract: Contract
) -> None:
    """10 connects to a listener of backlog 4 that leaves its requests unread for 3 s: the
    connects past the backlog (capped by net.rdma_ucm.max_backlog) get REJECTED with the
    profile's status, the queued ones are accepted and closed."""
    tl, result = run_storm(cm, count=10, backlog=4, hold_s=3.0)
    contract(tl)
    print(result.table())
    assert result.rejected == result.expected_rejects, explain(
        tl,
        f"listener backlog {result.backlog} (max_backlog {result.max_backlog}): "
        f"{result.rejected} rejects, expected {result.expected_rejects}",
    )
    want = cm.profile.of(cm.host(cm.active)).reject_status
    wrong = [e for e in tl.events if e.type == "REJECTED" and e.status != want]
    assert not wrong, explain(tl, f"rejects not REJECTED({want}): {wrong}")
    assert not result.failed, explain(tl, "connections failed: " + "; ".join(result.failed))
    assert result.established == result.closed_passive == result.backlog, explain(
        tl, f"{result.established} established, {result.closed_passive} closed by the passive side"
    )
