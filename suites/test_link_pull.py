"""Link pull: the pair's cable goes away while a connection is idle or carries traffic.

Parameters: ``direction``, ``mode`` (each pull mode hil knows; one the
reserved link does not offer skips, naming what it offers) and ``traffic``
(RDMA WRITEs in flight, or idle).  Each run connects, pulls, waits for
detection within the profile's bound (or holds the link down when the
provider promises none), restores the link and connects again.  The
contract judges ``link-pull-detected-within``, that the pull took the link
down and the restore brought it back (``link-pull-effective``), and the
pulled host's RDMA port state and port events in every mode as its profile
says (``link-pull-port-state``, ``link-pull-port-events``); the tests add
that the detection happened when the profile promises it, and that the
reconnect after the restore worked.  What the profile promises, or that it
promises nothing (siw idle: no keepalive), is said in the test's output and
as a step of its report.  Every test here is marked ``disruptive``.
"""

from __future__ import annotations

import pytest

from hil.cm import sequences
from hil.cm.session import CMSession
from hil.inventory.model import PULL_MODES
from hil.judge.profiles import Profiles
from hil.plugin.api import Contract, explain
from hil.report.attach import step

pytestmark = pytest.mark.disruptive


@pytest.mark.parametrize("traffic", [False, True], ids=["idle", "traffic"])
@pytest.mark.parametrize("mode", PULL_MODES)
def test_link_pull_then_restore_and_reconnect(
    cm: CMSession, contract: Contract, profile: Profiles, mode: str, traffic: bool
) -> None:
    """Detection within the profile's bound (when it has one), then a working reconnect."""
    offered = cm.pull_modes()
    if mode not in offered:
        pytest.skip(
            f"link {cm.pair.link.name} offers no {mode!r} pull "
            f"(offers: {', '.join(offered) or 'none'})"
        )
    promise = profile.link_pull_promise("admin" if mode == "admin" else "carrier", traffic)
    print(f"{mode} pull, {'traffic' if traffic else 'idle'}: {promise}")
    with step(str(promise)):
        tl = cm.run(sequences.link_pull, mode=mode, traffic=traffic)
    contract(tl)
    if promise.bound_s is not None:
        assert "detection_us" in tl.metrics, explain(
            tl, f"{promise}; no detection of the {mode} pull came"
        )
    if traffic:
        assert tl.metrics.get("traffic_ops", 0) > 0, explain(tl, "no traffic ran before the pull")
    c2 = [e for e in tl.events if e.conn == "c2" and e.type == "ESTABLISHED"]
    assert len(c2) == 2, explain(
        tl, "the reconnect after the restore did not establish on both sides"
    )
