"""A thin ctypes layer over librdmacm and libibverbs, for the remote agent.

Runs on a lab host under the host's own ``/usr/bin/python3``: standard
library only, and nothing imported from the rest of ``hil`` but the agent's
``protocol/``; it lives in the agent package (``hil/agent/remote/``) and is
bundled into its zipapp.

Why ctypes and not pyverbs: pyverbs' ``CMEvent`` exposes neither the event's
status nor the cm_id it belongs to, its event channel has no pollable fd, a
``get_cm_event`` blocks while holding the GIL, and an un-acked ``CMEvent``
deadlocks ``close()``.  The contract checks need status, id, listen_id,
private data and a timestamp for every event, and the agent must never block
without bound.  So here the channel's fd is non-blocking and polled with a
timeout, ``struct rdma_cm_event`` is read field by field, and every event is
acked right after it is copied (an un-acked event hangs ``rdma_destroy_id``).

cm_ids are named by small integer handles, never raw pointers, so they can
cross the agent's JSON channel.  On iWARP a connect or an accept needs a QP:
call :meth:`CMChannel.create_qp` on the id first (after ADDR_RESOLVED on the
active side, after CONNECT_REQUEST on the passive side).

Blocking: every call returns promptly except ``rdma_destroy_id`` on an id in
CONN_SENT (bounded by the provider's connect timeout: 10 s on siw,
``ep_timeout_secs`` on cxgb4) and siw's ``rdma_connect`` (a kernel TCP
connect).  ctypes releases the GIL in foreign calls, so the agent can run
those in a worker thread and keep answering.

The modules, bottom up: ``cdll`` (loading, calling, the errors), ``verbsabi``
and ``cmabi`` (the two libraries' structs and signatures, rdma-core's
headers on x86_64, rdma-core 44), ``ibverbs`` (a QP's PD, CQ and buffer, and
traffic on it), ``ids`` (handles), ``qps`` (QPs on ids), ``events`` (reading
the channel) and ``channel`` (:class:`CMChannel`).  The names most callers
use are here.
"""

from .cdll import RdmaError, RdmaUnavailable
from .channel import CMChannel, probe
from .cmabi import EVENT_NAMES, RESOLVE_MS, Lib, sockaddr_text
from .events import RawEvent, cook

__all__ = [
    "EVENT_NAMES",
    "RESOLVE_MS",
    "CMChannel",
    "Lib",
    "RdmaError",
    "RdmaUnavailable",
    "RawEvent",
    "cook",
    "probe",
    "sockaddr_text",
]
