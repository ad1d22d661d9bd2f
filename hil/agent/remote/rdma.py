"""RDMA devices, links and resources through iproute2's ``rdma`` tool (JSON).

pyroute2 has no RDMA netlink, so these run ``rdma -j ...``.  A host without
the tool, or whose kernel has no RDMA netlink, gets ``rdma_unavailable``.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Sequence
from typing import Any

from ..protocol import RESOURCE_TYPES, MethodName, RdmaDeviceReply, RdmaLinkReply
from .errors import OpError
from .system import run
from .tools import COMMANDS, RDMA

# What rdma prints when the kernel has no RDMA netlink (no ib_core loaded).
_NO_NETLINK = "Failed to open NETLINK_RDMA socket"
# What rdma prints for a device the kernel does not have (iproute2's rdma/utils.c).
_NO_DEVICE = "Wrong device name"


def _rdma(args: list[str], timeout: float) -> str:
    tool = shutil.which(RDMA)
    if tool is None:
        raise OpError(
            "rdma_unavailable",
            f"the {RDMA} tool is not installed (Debian package {COMMANDS[RDMA]})",
            argv=[RDMA, *args],
        )
    result = run([tool, *args], timeout)
    if result["status"] != 0:
        stderr = result["stderr"].strip()
        if _NO_NETLINK in stderr:
            raise OpError(
                "rdma_unavailable",
                f"the kernel has no RDMA netlink (rdma {' '.join(args)}: {stderr}); "
                "load ib_core and the RNIC driver (or siw)",
                argv=[RDMA, *args],
                stderr=stderr,
            )
        raise OpError(
            "command_failed",
            f"rdma {' '.join(args)} exited {result['status']}: {stderr}",
            argv=[RDMA, *args],
            status=result["status"],
            stderr=stderr,
        )
    return result["stdout"]


def _json(args: list[str], timeout: float) -> list[dict[str, Any]]:
    out = _rdma(["-j", *args], timeout)
    try:
        data = json.loads(out) if out.strip() else []
    except ValueError:
        raise OpError(
            "command_failed", f"rdma {' '.join(args)} printed no JSON: {out[:200]!r}"
        ) from None
    return data if isinstance(data, list) else [data]


def devices(timeout: float) -> list[RdmaDeviceReply]:
    """RDMA devices: name, index, node type, firmware (``rdma dev show``)."""
    return [
        {
            "name": d["ifname"],
            "index": d["ifindex"],
            "node_type": d.get("node_type"),
            "fw": d.get("fw"),
            "node_guid": d.get("node_guid"),
        }
        for d in _json(["dev", "show"], timeout)
    ]


def links(timeout: float) -> list[RdmaLinkReply]:
    """RDMA ports with their netdev and state (``rdma link show``)."""
    return [
        {
            "device": p["ifname"],
            "port": p["port"],
            "state": p.get("state"),
            "physical_state": p.get("physical_state"),
            "netdev": p.get("netdev"),
        }
        for p in _json(["link", "show"], timeout)
    ]


def add_siw(name: str, netdev: str, timeout: float) -> None:
    """Create the soft-iWARP device ``name`` on ``netdev``."""
    _rdma(["link", "add", name, "type", "siw", "netdev", netdev], timeout)


def delete_link(name: str, timeout: float) -> None:
    """Delete the RDMA link (e.g. a siw device) ``name``; ``not_found`` when there is none
    (a journaled creation that never happened is undone by this)."""
    try:
        _rdma(["link", "delete", name], timeout)
    except OpError as e:
        if e.kind == "command_failed" and _NO_DEVICE in str(e.details.get("stderr", "")):
            raise OpError("not_found", f"no RDMA device {name}: {e.message}", **e.details) from None
        raise


def resources(timeout: float, types: list[str] | None = None) -> dict[str, int]:
    """How many of each resource type (RESOURCE_TYPES: cm_id, qp, cq, mr, pd, ctx, srq)
    exist now; a type the devices' summaries do not list is left out, not counted as 0."""
    wanted = list(types) if types else list(RESOURCE_TYPES)
    unknown = sorted(set(wanted) - set(RESOURCE_TYPES))
    if unknown:
        raise OpError("bad_params", f"unknown RDMA resource types {unknown}; know {RESOURCE_TYPES}")
    # One `rdma resource show`: each device's summary counts (nldev's RES_SUMMARY, the
    # kernel's rdma_restrack_count per type), summed over the devices.  One process, not
    # one per type: a spawn costs 0.1-0.2 s in a TCG guest, and the checks ask twice a test.
    return summary_counts(_json(["resource", "show"], timeout), wanted)


def summary_counts(per_device: list[dict[str, Any]], types: Sequence[str]) -> dict[str, int]:
    """Each of ``types`` summed over the devices' summaries (``rdma -j resource show``),
    leaving out a type no summary lists.

    The summary lists the types the kernel tracks (nldev.c ``fill_res_info``): one it
    does not list is unknown here, not 0.  With no device at all, every count is truly 0.
    """
    listed = [t for t in types if not per_device or any(t in d for d in per_device)]
    return {t: sum(int(d.get(t, 0)) for d in per_device) for t in listed}


def resource_rows(type: str, timeout: float) -> list[dict[str, Any]]:
    """Every resource of ``type`` (one of RESOURCE_TYPES) as ``rdma -j resource show``
    prints it: the rows a caller filters (a QP's state, the cm_ids on a port)."""
    if type not in RESOURCE_TYPES:
        raise OpError("bad_params", f"unknown RDMA resource type {type!r}; know {RESOURCE_TYPES}")
    return _json(["resource", "show", type], timeout)


METHODS: dict[MethodName, Callable[..., object]] = {
    "rdma_devices": devices,
    "rdma_links": links,
    "rdma_add_siw": add_siw,
    "rdma_delete_link": delete_link,
    "rdma_resources": resources,
    "rdma_resource_rows": resource_rows,
}
