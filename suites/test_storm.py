"""A connection storm: N concurrent connects to one auto-accepting listener, then closes.

Parameters: ``direction`` and ``count``.  The contract judges every
connection (one reply each, no DISCONNECTED before ESTABLISHED, in-order
delivery, no event after destroy); the tests add that every connect was
established and closed, and report the rates in the test's output.
"""

from __future__ import annotations

import pytest
from cmsuite import Contract, explain, seen

from hil.cm.session import CMSession


@pytest.mark.parametrize("count", [16])
def test_storm_connects_and_closes_every_connection(
    cm: CMSession, contract: Contract, count: int
) -> None:
    """``count`` concurrent connects all establish, then all close with one DISCONNECTED each."""
    tl = cm.run("storm", count=count)
    contract(tl)
    established = seen(tl, "ESTABLISHED", cm.active)
    assert len(established) == count, explain(
        tl, f"{len(established)} of {count} concurrent connects established"
    )
    closed = seen(tl, "DISCONNECTED", cm.active)
    assert len(closed) == count, explain(tl, f"{len(closed)} of {count} connections closed")
    print(
        f"storm {count}: {tl.metrics.get('connect_rate_per_s', 0):.1f} connects/s, "
        f"{tl.metrics.get('cycle_rate_per_s', 0):.1f} connect+close cycles/s"
    )
