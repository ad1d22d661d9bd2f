"""Connection establishment and its refusals: connect, reject, connect with no listener.

Each test runs in both directions (``direction`` a-b / b-a; the unreachable
peer, which pulls the link for about 20 s on the lab, in one), judges the
timeline with the contract under the pair's provider profile, and states
the outcome the scenario exists for (the contract alone passes a timeline
in which nothing happened).
"""

from __future__ import annotations

import pytest

from hil.cm import sequences
from hil.cm.session import CMSession
from hil.cm.unreachable import unreachable
from hil.judge.profiles import Profiles
from hil.plugin.api import Contract, explain, seen


def test_connect_establishes_both_sides_and_carries_private_data(
    cm: CMSession, contract: Contract
) -> None:
    """Invariants 1-4 and 10: one CONNECT_REQUEST, ESTABLISHED on both sides, then a clean close."""
    tl = cm.run(sequences.connect, private_data=b"hil-connect")
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
    tl = cm.run(sequences.reject, private_data=b"hil-no-thanks")
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
    tl = cm.run(sequences.no_listener)
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


@pytest.mark.disruptive
@pytest.mark.parametrize("direction", ["a-b"])
def test_connect_to_a_blackholed_peer_ends_unreachable(
    cm: CMSession, contract: Contract, profile: Profiles
) -> None:
    """The link drops every frame: the connect ends as the connecting host's profile says
    for an unreachable peer (siw: rdma_connect fails ETIMEDOUT after the SYN retries;
    cxgb4: UNREACHABLE), within its bound (``unreachable-connect-ends``)."""
    modes = [m for m in ("blackhole", "carrier", "command") if m in cm.pull_modes()]
    if not modes:
        pytest.skip(f"link {cm.pair.link.name} offers no pull that leaves the netdevs up")
    tl = cm.run(unreachable, mode=modes[0])
    contract(tl)
    active = profile.of(cm.host(cm.active))
    pulled = [a.t_us for a in tl.actions if a.name == "pull"]
    tries = [a for a in tl.actions if a.name == "connect" and pulled and a.t_us > pulled[0]]
    assert len(tries) == 1, explain(tl, "scenario not reached: no connect while the link was down")
    if active.unreachable_connect_error:
        assert tries[0].result == active.unreachable_connect_error, explain(
            tl, f"rdma_connect should fail {active.unreachable_connect_error}"
        )
    else:
        got = [e for e in tl.events if e.id == tries[0].id and e.type in active.unreachable_events]
        assert got, explain(tl, f"expected one of {sorted(active.unreachable_events)}")
    assert not seen(tl, "CONNECT_REQUEST", cm.passive)[1:], explain(
        tl, "the black-holed connect reached the listener"
    )
