"""iw_cxgb4 regressions: endpoint timeouts while the adapter keeps delivering messages.

- ``regress_cxgb4_ep_timeout_under_flood`` guards 3e1e783998f6 "iw_cxgb4:
  endpoint timeout fixes" (2014): with CPL messages flowing in all the time,
  process_work() never got to the timed-out endpoints, and an endpoint on
  the timeout list still processed MPA starts and replies.  Here: RDMA WRITE
  streams into the active host on established connections while one of its
  connects waits for an MPA reply that never comes (the listener reads
  nothing); the connect must still end, within the provider's bound, and
  the streams must have kept flowing meanwhile.

The sequence runs on any pair (siw times the MPA reply out too); the suite
runs it on iw_cxgb4 pairs, where the bug was.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hil.cm import steps
from hil.cm.registry import sequence
from hil.cm.regressions.evidence import note
from hil.errors import InputError
from hil.judge.timeline import Timeline

if TYPE_CHECKING:
    from hil.cm.sides import PairSides


@sequence
def regress_cxgb4_ep_timeout_under_flood(s: PairSides, streams: int = 2) -> Timeline:
    """3e1e783998f6: a connect's MPA reply times out while WRITEs flood into its host."""
    if not 1 <= streams <= 8:
        raise InputError("streams 1..8, please")
    with s.recording("regress-cxgb4-ep-timeout-under-flood") as rec:
        listener = steps.listen(rec, s.passive)
        active = rec.endpoint(s.active)
        conns = [steps.establish(rec, active, listener, f"load{i}") for i in range(streams)]
        for c in conns:  # the passive side writes into the active side: messages come in
            steps.payload(c)  # before the flood, which overwrites the buffers
            remote = {k: c.active_qp[k] for k in ("addr", "rkey")}
            out = c.passive.stream_start(c.passive_id, "write", remote=remote)
            if not out.ok:
                raise steps.StepFailed(c.passive.host, f"traffic on {c.label}: {out.action.result}")
        silent = steps.listen(rec, s.passive)
        silent.ep.pause(True)
        dial = steps.start_connect(rec, active, silent, b"hil-reg-timeout")
        reply = None
        if dial.ok and dial.id:
            rec.label("timeout", dial.id)
            reply = active.wait(steps.REPLY_TYPES, dial.id, steps.waits(s).reply_s)
        ops = sum(c.passive.stream_stop(c.passive_id)["ops"] for c in conns)
        rec.metric("flood_ops", float(ops))
        note(rec, "connect_timed_out", reply is not None and reply.type != "ESTABLISHED")
        note(rec, "messages_flowed_meanwhile", ops > 0)
        steps.destroy(active, dial.id)
        steps.destroy(silent.ep, silent.id)
        silent.ep.pause(False)
        for c in conns:
            steps.close(c)
            steps.teardown(c)
        steps.destroy(listener.ep, listener.id)
    return rec.timeline()
