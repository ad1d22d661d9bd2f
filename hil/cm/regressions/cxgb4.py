"""iw_cxgb4 regressions: endpoint timeouts while the adapter keeps delivering CPL messages.

- ``regress_cxgb4_ep_timeout_under_churn`` guards b33bd0cbfa10 "RDMA/cxgb4:
  Endpoint timeout fixes" (Steve Wise, 2014; read at
  gerrit-public.fairphone.software kernel/msm-4.19 +/b33bd0cbfa10): "If there
  are continual CPL messages flowing into the driver, the endpoint timeout
  processing can be starved"; the fix makes process_work() run
  process_timedout_eps() after each CPL, and makes an endpoint already queued
  for its timeout ignore MPA starts and replies.

Which traffic raises CPL messages for the host driver (iw_cxgb4 of Debian
6.1.192): the CPLs iw_cxgb4 queues for process_work() are the connection
manager's (``c4iw_handlers``, cm.c 4440-4459, each ``sched``: the active and
passive opens and establishes, CPL_RX_DATA and CPL_FW4_ACK while the MPA
exchange runs in streaming mode, the closes and aborts, CPL_RDMA_TERMINATE).
An RDMA WRITE raises none of them: the adapter places it; a CQ's notification
reaches c4iw_ev_handler() straight from c4iw_uld_rx_handler() (device.c
1191-1196), never the CPL queue, and an RQ-side WRITE CQE is not even a
completion (cq.c 432).  So the CPLs flow here from a churn of connections
on the active host: each connect, its MPA exchange and its close raise
ACT_ESTABLISH (cm.c 1214), FW4_ACK (3058), RX_DATA (1846) and
CLOSE_CON_RPL / PEER_CLOSE (2976, 2712) on that host, all through
process_work() (4299-4325), while one of its connects waits for an MPA
reply that never comes (its listener reads nothing).  That connect must
still end within the provider's bound, and the churn must have run while it
waited (else the timeout was never up against a flow of CPLs).

The sequence runs on any pair (siw times the MPA reply out too, and its
churn goes through siw_cm_wq, not CPLs); the suite runs it on iw_cxgb4
pairs, where the bug was.

The iw_cxgb4 case the reference peer plays (d219face9059, a TERMINATE
received) is in :mod:`hil.peer.regressions`.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING

from hil.cm import steps
from hil.cm.clock import controller_us
from hil.cm.registry import sequence
from hil.cm.regressions.evidence import note, window
from hil.errors import InputError
from hil.judge.timeline import Timeline

if TYPE_CHECKING:
    from hil.cm.endpoint import Endpoint
    from hil.cm.recording import Recording
    from hil.cm.sides import PairSides
    from hil.cm.steps import Listener

CHURN_MAX = 200  # connections at most: a bound should the timed connect never end


@dataclass(frozen=True)
class Churned:
    """One churned connection: when its connect began and its close ended (controller µs)."""

    began_us: int
    ended_us: int


@sequence
def regress_cxgb4_ep_timeout_under_churn(s: PairSides, most: int = CHURN_MAX) -> Timeline:
    """b33bd0cbfa10: a connect's MPA reply times out while connections churn on its host."""
    if not 1 <= most <= CHURN_MAX:
        raise InputError(f"most 1..{CHURN_MAX}, please")
    with s.recording("regress-cxgb4-ep-timeout-under-churn") as rec:
        listener = steps.listen(rec, s.passive)
        silent = steps.listen(rec, s.passive)
        silent.ep.pause(True)
        active, churner = rec.endpoint(s.active), rec.endpoint(s.active)
        stop = threading.Event()
        with ThreadPoolExecutor(1, thread_name_prefix="churn") as pool:
            churn = pool.submit(_churn, rec, churner, listener, stop, most)
            dial = steps.start_connect(rec, active, silent, b"hil-reg-timeout")
            dialled_us, reply = controller_us(), None
            if dial.ok and dial.id:
                rec.label("timeout", dial.id)
                reply = active.wait(steps.REPLY_TYPES, dial.id, steps.waits(s).reply_s)
            replied_us = controller_us()
            stop.set()
            done = churn.result()
        meanwhile = while_waiting(done, dialled_us, replied_us)
        rec.metric("churned", float(len(done)))
        rec.metric("churned_while_it_waited", float(len(meanwhile)))
        timed_out = reply is not None and reply.type != "ESTABLISHED"
        note(rec, "connect_timed_out", timed_out)
        note(rec, "connections_churned_while_it_waited", bool(meanwhile))
        # The fix's window: the endpoint timer firing while the work loop is busy with
        # other connections' messages.
        window(rec, "endpoint_timeout_amid_churn", timed_out and bool(meanwhile))
        steps.destroy(active, dial.id)
        steps.destroy(silent.ep, silent.id)
        silent.ep.pause(False)
        steps.destroy(listener.ep, listener.id)
    return rec.timeline()


def while_waiting(done: list[Churned], dialled_us: int, replied_us: int) -> list[Churned]:
    """The churned connections that began after the timed connect was dialled and ended
    before its answer came: each raised its CPLs while that connect waited."""
    return [c for c in done if dialled_us <= c.began_us and c.ended_us <= replied_us]


def _churn(
    rec: Recording, ep: Endpoint, listener: Listener, stop: threading.Event, most: int
) -> list[Churned]:
    """Connect, close and destroy one connection after another from ``ep`` to ``listener``
    until ``stop`` (or ``most`` of them); when each began and ended."""
    done: list[Churned] = []
    while not stop.is_set() and len(done) < most:
        began = controller_us()
        conn = steps.establish(rec, ep, listener, f"churn{len(done)}")
        steps.close(conn)
        steps.teardown(conn)
        done.append(Churned(began, controller_us()))
    return done
