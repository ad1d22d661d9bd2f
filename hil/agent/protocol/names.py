"""The protocol's closed sets: the agent's methods, the error kinds, the CM event
types and operations, and the small enums their params use (``Literal``\\s, each
with its tuple of values)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, get_args

if TYPE_CHECKING:
    from typing import TypeGuard  # python >= 3.10; annotations here stay strings

__all__ = [
    "MethodName", "ErrorKind", "CMEventType", "CMOpName", "ScenarioOpName", "AutoAnswer",
    "StreamMode", "DestroyOrder", "ResourceType", "METHOD_NAMES", "CM_EVENT_TYPES", "CM_OP_NAMES",
    "SCENARIO_OP_NAMES", "STREAM_MODES", "DESTROY_ORDERS", "RESOURCE_TYPES", "is_method_name",
]  # fmt: skip


MethodName = Literal[
    # system.py
    "ping",
    "run",
    "sysctl_get",
    "sysctl_set",
    # netlink.py
    "links",
    "link",
    "addresses",
    "set_link",
    "add_address",
    "delete_address",
    "flush_addresses",
    "wait_link",
    "add_link",
    "delete_link",
    # ethtool.py
    "ethtool_drvinfo",
    # rdma.py
    "rdma_devices",
    "rdma_links",
    "rdma_add_siw",
    "rdma_delete_link",
    "rdma_resources",
    "rdma_resource_rows",
    # kmsg.py
    "kmsg_cursor",
    "kmsg_read",
    "kmsg_close",
    # cm/methods.py
    "cm_now",
    "clock_pair",
    "cm_open",
    "cm_call",
    "cm_kill",
    "cm_close",
    "cm_endpoints",
    # probe.py
    "tcp_exchange",
    # clockpeer.py
    "clock_echo",
    "clock_probe",
    # cm/close.py
    "cm_close_race",
    # peer/op.py
    "peer_run",
    "peer_resume",
    "peer_close",
]

# The ``type`` of an error answer (raised on the agent as ``OpError(kind, ...)``).
ErrorKind = Literal[
    "timeout",  # a bounded operation overran (or the watchdog answered for it)
    "wait_timeout",  # a wanted state did not come (wait_link)
    "netlink",  # the kernel refused a netlink request: details.errno
    "not_found",  # no such interface, sysctl, cursor or CM endpoint
    "rdma_unavailable",  # no rdma tool, no RDMA netlink, no librdmacm or RDMA device
    "command_failed",  # an rdma command exited non-zero: details.status, details.stderr
    "os",  # a system call failed: details.errno
    "bad_request",  # a line that is not a request
    "bad_params",  # params the method does not take
    "unknown_method",  # details.known lists the methods
    "internal",  # an agent bug: details.traceback
    "rdma",  # a CM operation failed in librdmacm/libibverbs: CMErrorDetails
    "cm_worker_died",  # a CM endpoint's process is gone: details.status
]

# enum rdma_cm_event_type (rdma/rdma_cma.h), in its order: the index is the value.
CMEventType = Literal[
    "ADDR_RESOLVED",
    "ADDR_ERROR",
    "ROUTE_RESOLVED",
    "ROUTE_ERROR",
    "CONNECT_REQUEST",
    "CONNECT_RESPONSE",
    "CONNECT_ERROR",
    "UNREACHABLE",
    "REJECTED",
    "ESTABLISHED",
    "DISCONNECTED",
    "DEVICE_REMOVAL",
    "MULTICAST_JOIN",
    "MULTICAST_ERROR",
    "ADDR_CHANGE",
    "TIMEWAIT_EXIT",
]

CMOpName = Literal[
    "listen",
    "connect",
    "accept",
    "reject",
    "disconnect",
    "qp_err",
    "destroy",
    "stream_start",
    "stream_stop",
    "stream_stats",
    "write",
    "events",
    "pause",
    "handles",
    "scenario",
    "storm",
    "payload",
    "reads",
    "query_qp",
    "reg_mr",
    "flushed",
    "last_sends",
    "last_receives",
    "received",
    "messages",
    "rping",
    "send_bw",
]
# The operations a scenario step may run (the worker's ops of these names).
ScenarioOpName = Literal[
    "listen", "connect", "accept", "reject", "disconnect", "qp_err", "destroy", "pause", "write"
]
AutoAnswer = Literal["accept", "reject"]  # a listener answering its requests itself
StreamMode = Literal["write", "send", "sink"]
# destroy: the QP before the id (rdma_cm's documented order), or the id while its QP
# still exists (librdmacm's rdma_destroy_id leaves it; the QP is destroyed after).
DestroyOrder = Literal["qp_first", "id_first"]
# The kernel's resource tracker types as `rdma resource show` names them: the names of
# drivers/infiniband/core/nldev.c `fill_res_info`, which iproute2's rdma/res.c
# `res_print_summary` prints verbatim as the JSON keys of each device's summary.  The lab's
# 6.1 guests list all seven; older kernels list fewer (no srq, no ctx), newer ones more.
ResourceType = Literal["cm_id", "qp", "cq", "mr", "pd", "ctx", "srq"]

METHOD_NAMES: tuple[MethodName, ...] = get_args(MethodName)
CM_EVENT_TYPES: tuple[CMEventType, ...] = get_args(CMEventType)
CM_OP_NAMES: tuple[CMOpName, ...] = get_args(CMOpName)
SCENARIO_OP_NAMES: tuple[ScenarioOpName, ...] = get_args(ScenarioOpName)
STREAM_MODES: tuple[StreamMode, ...] = get_args(StreamMode)
DESTROY_ORDERS: tuple[DestroyOrder, ...] = get_args(DestroyOrder)
RESOURCE_TYPES: tuple[ResourceType, ...] = get_args(ResourceType)


def is_method_name(name: str) -> TypeGuard[MethodName]:
    """True when ``name`` is an agent method this protocol declares."""
    return name in METHOD_NAMES
