"""Destroys that block: an active id in CONN_SENT, a listener holding requests."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from hil.agent import protocol as wire
from hil.cm import steps
from hil.cm.races.conns import dial
from hil.cm.registry import sequence
from hil.cm.scenario import Script, Step, run
from hil.cm.sequences.common import choice
from hil.cm.steps import Listener, StepFailed, step_slack_s, waits
from hil.judge.timeline import Timeline

if TYPE_CHECKING:
    from hil.cm.recording import Recording
    from hil.cm.sides import PairSides

# The worker's poller reads with a 100 ms poll: let one under way finish.
PAUSE_SETTLE_S = 0.5
# Time for connects' MPA requests to reach the passive kernel, unretrieved.
ARRIVE_S = 1.0
# After a destroy in CONN_SENT returned, before the passive side's late accept (the
# contract's rule takes the close to have arrived 1 s after the destroy returned).
LATE_ACCEPT_S = 1.5
# On the host, from rdma_connect's return (its MPA request sent) to the destroy in CONN_SENT.
DESTROY_AFTER_US = 200_000


@sequence
def destroy_conn_sent(s: PairSides, order: str = "qp_first") -> Timeline:
    """Connect to a listener that never answers; destroy the active id in CONN_SENT; then
    the passive side accepts the request its peer gave up (it must fail ECONNRESET).

    ``order``: ``qp_first`` destroys the QP, then the id (as rdma_cm
    applications do: on siw the QP's destroy is what blocks); ``id_first``
    the id while its QP still exists (iw_cm's own wait for the connect's
    reply), then the QP.  The connect and the destroy run in one host-side
    script, the destroy DESTROY_AFTER_US after rdma_connect returned: [lab]
    issued from the controller after the passive's CONNECT_REQUEST, it came
    after the 10 s MPA timer had ended the connect on a loaded machine.
    """
    how = choice("order", order, wire.DESTROY_ORDERS)
    bound = s.profile.of(s.host(s.active)).conn_sent_destroy_bound_s  # the destroying host's
    with s.recording("destroy-conn-sent") as rec:
        listener = steps.listen(rec, s.passive)
        active = rec.endpoint(s.active)
        script = Script(
            (
                Step("connect", name="c", params=dial(rec, listener, "hil")),
                Step("destroy", id_of="c", after_us=DESTROY_AFTER_US, params={"order": how}),
            ),
            deadline_s=bound + step_slack_s(),
        )
        connect, destroy = run(active, script).steps
        if not connect.ok or connect.id is None:
            raise StepFailed(active.host, f"connect to port {listener.port}: {connect.result}")
        if destroy.ok and destroy.us is not None:
            rec.metric("destroy_blocked_us", destroy.us)
        if "qp_us" in destroy.reply:
            rec.metric("qp_destroy_us", destroy.reply["qp_us"])
        req = steps.expect(listener.ep, "CONNECT_REQUEST", None, "destroy in CONN_SENT")
        rec.label("c1", connect.id, req.id)
        # Invariant 4 (accept-after-peer-abort-fails): the destroy returned once the
        # provider gave the connect up and closed it; the peer's close reaches the
        # passive host well within LATE_ACCEPT_S.
        time.sleep(LATE_ACCEPT_S)
        listener.ep.accept(req.id, b"too-late")
        steps.destroy(listener.ep, req.id, listener.id)
    return rec.timeline()


@sequence
def listener_destroy(s: PairSides, pending: int = 2, accepted: int = 1) -> Timeline:
    """Destroy a listener holding unretrieved requests: they are REJECTED; accepted ids live.

    [lab] A poll already under way when the listener's endpoint is paused can
    still retrieve a request meant to stay pending, so the pause settles
    before the connects, and any request retrieved after all is tied to its
    connect by the private data it carried.
    """
    with s.recording("listener-destroy") as rec:
        listener = steps.listen(rec, s.passive)
        active = rec.endpoint(s.active)
        conns = [steps.establish(rec, active, listener, f"c{i}") for i in range(accepted)]
        listener.ep.pause(True)
        time.sleep(PAUSE_SETTLE_S)
        tries = [
            steps.start_connect(rec, active, listener, f"hil-p{i}".encode()) for i in range(pending)
        ]
        for i, t in enumerate(tries):
            rec.label(f"p{i}", t.id)
        time.sleep(ARRIVE_S)
        out = listener.ep.destroy(listener.id, timeout=waits(s).destroy_s)
        if out.action.duration_us is not None:
            rec.metric("destroy_blocked_us", out.action.duration_us)
        listener.ep.pause(False)
        for t in tries:
            if t.ok and t.id:
                active.wait(steps.REPLY_TYPES, t.id, waits(s).reply_s)
        _label_retrieved_requests(rec, listener, pending)
        for c in conns:
            steps.payload(c)  # after its listener's destroy: it still carries data
            steps.close(c, "active")
            steps.teardown(c)
        steps.destroy(active, *(t.id for t in tries))
        steps.destroy(listener.ep, *listener.ep.handles())
    return rec.timeline()


def _label_retrieved_requests(rec: Recording, listener: Listener, pending: int) -> None:
    """Tie any passive request that was retrieved after all to its connect's label."""
    listener.ep.collect(0.3)
    for e in rec.events():
        if e.type != "CONNECT_REQUEST" or e.side != listener.ep.side:
            continue
        for i in range(pending):
            if e.private_bytes.startswith(f"hil-p{i}".encode()):
                rec.label(f"p{i}", e.id)
