"""The two siw guests' clocks, measured host to host on a real virtual lab (marker ``lab``).

The probes cross the pair's data link (UDP between the guests' data
addresses); the controller's SSH estimate of each guest is the independent
check: both must tell the same relative offset within their uncertainties,
and cause must come before effect across the two hosts on the timeline.
"""

from __future__ import annotations

import pytest
from cmlab import CMPair

from hil.cm import clock

pytestmark = pytest.mark.lab

SSH_ROUNDS = 20


def test_the_guests_clocks_are_known_to_each_other_far_tighter_than_over_ssh(
    cm_pair: CMPair, capsys: pytest.CaptureFixture[str]
) -> None:
    s = cm_pair.run.session()
    s.refresh_offsets()
    if not s.clocks():
        pytest.fail("no host-to-host clock: the probes over the data link got no answer (log)")
    (rc,) = s.clocks()
    a, b = (clock.estimate(s.host(x), clock.agent_now(s.agent(x)), SSH_ROUNDS) for x in "ab")
    # controller = host + offset, and a = b + rc.offset: rc.offset = offset_b - offset_a.
    over_ssh = b.offset_us - a.offset_us
    slack = a.uncertainty_us + b.uncertainty_us + rc.uncertainty_us
    assert abs(over_ssh - rc.offset_us) <= slack, (rc, a, b)
    assert rc.uncertainty_us < a.uncertainty_us + b.uncertainty_us, (rc, a, b)
    with capsys.disabled():
        print(
            f"\n{rc.host_a} - {rc.host_b}: host to host {rc.offset_us} +/- {rc.uncertainty_us} us; "
            f"over SSH ({SSH_ROUNDS} rounds each) {over_ssh} +/- "
            f"{a.uncertainty_us + b.uncertainty_us} us"
        )


def test_a_timeline_orders_cause_before_effect_across_the_hosts(cm_pair: CMPair) -> None:
    """Placed through the relative clock, the passive CONNECT_REQUEST comes after the
    active rdma_connect began, and the active ESTABLISHED after the passive accept began."""
    s = cm_pair.run.session()
    tl = s.run("connect")
    assert tl.clocks, "the recording measured no host-to-host clock"
    unc = tl.uncertainty_us(*tl.pair)
    assert unc == tl.clocks[0].uncertainty_us
    connect = next(x for x in tl.actions if x.name == "connect" and x.side == s.active)
    accept = next(x for x in tl.actions if x.name == "accept" and x.side == s.passive)
    request = next(e for e in tl.events if e.type == "CONNECT_REQUEST")
    established = next(e for e in tl.events if e.type == "ESTABLISHED" and e.side == s.active)
    assert connect.t_us <= request.t_us + unc, (connect.brief(), request.brief(), unc)
    assert accept.t_us <= established.t_us + unc, (accept.brief(), established.brief(), unc)
