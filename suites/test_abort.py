"""Abortive close: the QP moved to ERR, the cm_id destroyed while connected, SIGKILL.

Parameters: ``direction``, ``how`` (qp_err, destroy, kill) and ``by`` (the
end that aborts).  The contract judges the statuses (``close-status``: the
local side of a QP->ERR, the peer of any abort), that a destroyed id gets no
event after its destroy returned (``no-event-after-destroy``) and that no
side sees two DISCONNECTED; the tests add that the peer noticed.  On siw the
aborting side of ``destroy`` gets DISCONNECTED(0) while the call runs (it
destroys the QP first, which moves it to ERR) [lab].

A remote access error ends a connection too: an RDMA WRITE with a wrong rkey
or past the end of the peer's buffer (``how`` bad_rkey / past_end), judged by
``remote-access-error-completes-and-disconnects``: the WRITE's completion and
both sides' DISCONNECTED have the profile's statuses.  On siw the WRITE
completes IBV_WC_SUCCESS (siw completes a WRITE once it is sent); the peer's
TERMINATE then closes both sides with DISCONNECTED(0) [lab].
"""

from __future__ import annotations

import pytest

from hil.cm import sequences
from hil.cm.session import CMSession
from hil.judge.profiles import Profiles
from hil.plugin.api import Contract, explain, seen


@pytest.mark.parametrize("by", ["active", "passive"])
@pytest.mark.parametrize("how", ["qp_err", "destroy", "kill"])
def test_abort_is_seen_by_the_peer(
    cm: CMSession, contract: Contract, profile: Profiles, how: str, by: str
) -> None:
    """The peer of an abortive close gets DISCONNECTED with a status the profile allows."""
    tl = cm.run(sequences.abort, how=how, by=by)
    contract(tl)
    aborter = cm.active if by == "active" else cm.passive
    peer = cm.other(aborter)
    got = seen(tl, "DISCONNECTED", peer)
    assert len(got) == 1, explain(
        tl, f"the peer (side {peer}) of a {how} by the {by} side saw no DISCONNECTED"
    )
    # The peer's status is its own driver's, for what the aborting host put on the wire.
    closer = profile.of(cm.host(aborter))
    allowed = profile.of(cm.host(peer)).peer_abort_statuses(closer)
    assert got[0].status in allowed, explain(
        tl,
        f"peer DISCONNECTED status {got[0].status}; profile {profile.name} allows "
        f"{sorted(allowed)}",
    )
    if how == "qp_err":
        local = seen(tl, "DISCONNECTED", aborter)
        assert len(local) == 1 and local[0].status in closer.abort_statuses, explain(
            tl,
            f"moving the QP to ERR should give the aborting side one DISCONNECTED with a "
            f"status in {sorted(closer.abort_statuses)}",
        )
    # After destroy the aborting side may still get the DISCONNECTED its QP's
    # destroy causes, but only while the call runs: no-event-after-destroy.


@pytest.mark.parametrize("how", ["bad_rkey", "past_end"])
def test_remote_access_error_ends_the_connection(
    cm: CMSession, contract: Contract, profile: Profiles, how: str
) -> None:
    """A WRITE the peer refuses completes as the profile says; both sides get DISCONNECTED."""
    tl = cm.run(sequences.remote_access_error, how=how)
    contract(tl)
    writes = [a for a in tl.actions if a.name == "write"]
    assert len(writes) == 1 and writes[0].ok, explain(tl, f"the {how} WRITE got no completion")
    status = writes[0].params["wc_status"]
    writer = profile.of(cm.host(cm.active))  # the writer's driver completes the WRITE
    assert status in writer.remote_access_write_statuses, explain(
        tl,
        f"the {how} WRITE completed {writes[0].params['wc_status_name']}({status}); profile "
        f"{writer.name} allows {sorted(writer.remote_access_write_statuses)}",
    )
    for side in (cm.active, cm.passive):
        got = seen(tl, "DISCONNECTED", side)
        allowed = profile.of(cm.host(side)).remote_access_statuses
        assert len(got) == 1 and got[0].status in allowed, explain(
            tl,
            f"side {side} should get one DISCONNECTED with a status in "
            f"{sorted(allowed)} after the refused WRITE",
        )
