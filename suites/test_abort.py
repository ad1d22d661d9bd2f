"""Abortive close: the QP moved to ERR, the cm_id destroyed while connected, SIGKILL.

Parameters: ``direction``, ``how`` (qp_err, destroy, kill) and ``by`` (the
end that aborts).  The contract judges the statuses (``close-status``: the
local side of a QP->ERR, the peer of any abort), that a destroyed id gets no
event after its destroy returned (``no-event-after-destroy``) and that no
side sees two DISCONNECTED; the tests add that the peer noticed.  On siw the
aborting side of ``destroy`` gets DISCONNECTED(0) while the call runs (it
destroys the QP first, which moves it to ERR) [lab].
"""

from __future__ import annotations

import pytest
from cmsuite import Contract, explain, seen

from hil.cm.session import CMSession
from hil.judge.profiles import Profile


@pytest.mark.parametrize("by", ["active", "passive"])
@pytest.mark.parametrize("how", ["qp_err", "destroy", "kill"])
def test_abort_is_seen_by_the_peer(
    cm: CMSession, contract: Contract, profile: Profile, how: str, by: str
) -> None:
    """The peer of an abortive close gets DISCONNECTED with a status the profile allows."""
    tl = cm.run("abort", how=how, by=by)
    contract(tl)
    aborter = cm.active if by == "active" else cm.passive
    peer = cm.other(aborter)
    got = seen(tl, "DISCONNECTED", peer)
    assert len(got) == 1, explain(
        tl, f"the peer (side {peer}) of a {how} by the {by} side saw no DISCONNECTED"
    )
    assert got[0].status in profile.peer_abort_statuses(), explain(
        tl,
        f"peer DISCONNECTED status {got[0].status}; profile {profile.name} allows "
        f"{sorted(profile.peer_abort_statuses())}",
    )
    if how == "qp_err":
        local = seen(tl, "DISCONNECTED", aborter)
        assert len(local) == 1 and local[0].status in profile.abort_statuses, explain(
            tl,
            f"moving the QP to ERR should give the aborting side one DISCONNECTED with a "
            f"status in {sorted(profile.abort_statuses)}",
        )
    # After destroy the aborting side may still get the DISCONNECTED its QP's
    # destroy causes, but only while the call runs: no-event-after-destroy.
