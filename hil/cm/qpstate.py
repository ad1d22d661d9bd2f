"""A connection's QP as the kernel's resource tracker shows it, recorded as an action.

Invariant 9 of docs/contract.md: the QP reference is held until CLOSE.  What
a user can see of it is ``rdma -j resource show qp``: after an abortive close
the QP must still be there, in ERR, until the user destroys it.  A sequence
reads it with :func:`record` and the rule ``qp-err-until-close``
(:mod:`hil.judge.invariants`) judges the ``qp_state`` action it records:
params ``qpn`` and ``state`` (the tool's name, ``ERR``, ``RTS``, ``SQD``...,
or ``absent`` when the host has no QP of that number).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hil.cm.clock import controller_us
from hil.judge.timeline import Action

if TYPE_CHECKING:
    from hil.cm.endpoint import Endpoint
    from hil.cm.recording import Recording

READ_TIMEOUT_S = 15.0  # one `rdma` run on a loaded TCG guest takes well under a second


def record(rec: Recording, ep: Endpoint, cm_id: str, qpn: int, device: str | None = None) -> Action:
    """Read the state of QP ``qpn`` (``ep``'s connection's) of RDMA ``device`` (any when
    None) on its host and record it as a ``qp_state`` action on ``cm_id``; the agent's
    error when the host's ``rdma`` fails."""
    start = controller_us()
    rows = ep.agent.rdma_resource_rows("qp", READ_TIMEOUT_S)
    # QP numbers are unique per device: the number and the pair's device find it (the
    # tool shows no pid for siw's QPs on the lab's 6.1 kernel).
    state = next(
        (
            str(r.get("state"))
            for r in rows
            if r.get("lqpn") == qpn and (device is None or r.get("ifname") == device)
        ),
        "absent",
    )
    params = {"qpn": qpn, "state": state}
    action = Action(start, ep.side, "qp_state", cm_id, params, "ok", controller_us() - start)
    rec.add_action(action)
    return action
