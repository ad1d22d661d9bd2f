"""Connection establishment and its refusals: connect, reject, connect with no listener.

Each test runs in both directions (``direction`` a-b / b-a), judges the
timeline with the contract under the pair's provider profile, and states
the outcome the scenario exists for (the contract alone passes a timeline
in which nothing happened).
"""

from __future__ import annotations

from cmsuite import Contract, explain, seen

from hil.cm.session import CMSession
from hil.judge.profiles import Profiles


def test_connect_establishes_both_sides_and_carries_private_data(
    cm: CMSession, contract: Contract
) -> None:
    """Invariants 1-4 and 10: one CONNECT_REQUEST, ESTABLISHED on both sides, then a clean close."""
    tl = cm.run("connect", private_data=b"hil-connect")
    contract(tl)
    requests = seen(tl, "CONNECT_REQUEST", cm.passive)
    assert len(requests) == 1, explain(
        tl, "expected exactly one CONNECT_REQUEST on the passive side"
    )
    assert requests[0].private_bytes.startswith(b"hil-connect"), explain(
        tl, "the CONNECT_REQUEST lacks the active side's private data"
    )
    for side in (cm.active, cm.passive):
        assert len(seen(tl, "ESTABLISHED", side)) == 1, explain(
            tl, f"expected one ESTABLISHED on side {side}"
        )
    assert tl.metrics.get("connect_us", 0) > 0, explain(tl, "no connect time measured")


def test_reject_gives_rejected_with_the_private_data(
    cm: CMSession, contract: Contract, profile: Profiles
) -> None:
    """rdma_reject: the active side gets REJECTED, its profile's status, the reject's data."""
    tl = cm.run("reject", private_data=b"hil-no-thanks")
    contract(tl)
    rejected = seen(tl, "REJECTED", cm.active)
    assert len(rejected) == 1, explain(tl, "expected one REJECTED on the active side")
    active = profile.of(cm.host(cm.active))  # the active host maps the reject to a status
    assert rejected[0].status == active.reject_status, explain(
        tl,
        f"REJECTED status {rejected[0].status}, profile {active.name} says {active.reject_status}",
    )
    assert not seen(tl, "ESTABLISHED"), explain(tl, "a rejected connect was ESTABLISHED")


def test_connect_with_no_listener_is_refused(
    cm: CMSession, contract: Contract, profile: Profiles
) -> None:
    """No listener on the port: refused as the connecting host's profile says (siw:
    rdma_connect fails)."""
    tl = cm.run("no_listener")
    contract(tl)
    connects = [a for a in tl.actions if a.name == "connect"]
    assert len(connects) == 1, explain(tl, "expected one connect action")
    active = profile.of(cm.host(cm.active))
    if active.no_listener_connect_error:
        assert connects[0].result == "ECONNREFUSED", explain(
            tl, "rdma_connect with no listener should fail ECONNREFUSED"
        )
    else:
        replies = [
            e for e in tl.events if e.side == cm.active and e.type in active.no_listener_events
        ]
        assert replies, explain(tl, f"expected one of {sorted(active.no_listener_events)}")
    assert not seen(tl, "ESTABLISHED"), explain(tl, "a connect with no listener was ESTABLISHED")
