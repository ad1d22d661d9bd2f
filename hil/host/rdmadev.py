"""A port's RDMA device: which one pair setup picks, which driver runs it, where it sits.

:func:`plan_device` is the one place that decides the device (the
inventory's ``rdma_device``, else the ``siw_<netdev>`` fallback); its driver
comes from sysfs, read with ``cat`` and ``readlink -f`` through the agent's
``run`` (argv lists), so a recorded host (tests/data/t6) serves them as files.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from hil import tools
from hil.agent.client import AgentCallError
from hil.errors import HilError, InputError, RemoteError
from hil.judge.profiles import PROVIDERS, provider_named

if TYPE_CHECKING:
    from hil.agent import Agent
    from hil.agent.agent import Runner
    from hil.agent.types import RdmaLink
    from hil.inventory.model import Rnic

SYSFS_IB = "/sys/class/infiniband"
SYSFS_NET = "/sys/class/net"
READ_TIMEOUT = 15.0


def read_file(agent: Agent, host: str, path: str) -> str:
    """A sysfs (or procfs) file's content, stripped; RemoteError naming host and file."""
    r = agent.run(tools.argv("cat", path), timeout=READ_TIMEOUT)
    if r.status != 0:
        why = r.why()
        raise RemoteError(host, f"cannot read {path} ({why})")
    return r.stdout.strip()


def rdma_core_version(agent: Runner, host: str) -> str:
    """rdma-core's package version (iwpmd, librdmacm, the providers): Debian's, then RPM's.

    RemoteError naming the host and what each package manager said when neither knows it.
    """
    whys: list[str] = []
    for argv in (
        tools.argv("dpkg-query", "-W", "-f=${Version}", "rdma-core"),
        tools.argv("rpm", "-q", "--qf", "%{VERSION}-%{RELEASE}", "rdma-core"),
    ):
        try:
            r = agent.run(argv, timeout=READ_TIMEOUT)
        except HilError as e:
            whys.append(f"{argv[0]}: {e}")
            continue
        if r.status == 0 and r.stdout.strip():
            return r.stdout.strip().splitlines()[0]
        whys.append((r.stderr.strip().splitlines() or [f"{argv[0]}: exit {r.status}"])[-1])
    raise RemoteError(host, f"cannot tell rdma-core's version ({'; '.join(whys)})")


def device_driver(agent: Agent, host: str, device: str) -> str:
    """The provider behind RDMA device ``device`` on ``host``, as sysfs tells it.

    Its ``node_desc`` names the registered providers (iw_cxgb4's parent PCI
    function is bound by ``cxgb4``, not ``iw_cxgb4``, so the description comes
    first); else the driver of its parent device (irdma's, with an empty
    ``node_desc``, is ``ice`` or ``i40e``, its spec's ``parent_drivers``).
    """
    base = posixpath.join(SYSFS_IB, device)
    desc = read_file(agent, host, posixpath.join(base, "node_desc"))
    for spec in PROVIDERS:
        # an empty node_desc in a spec would claim every device
        if spec.node_desc and desc.startswith(spec.node_desc):
            return spec.driver
    link = agent.run(
        tools.argv("readlink", "-f", posixpath.join(base, "device", "driver")), timeout=READ_TIMEOUT
    )
    parent = posixpath.basename(link.stdout.strip()) if link.status == 0 else ""
    if parent:
        try:
            return provider_named(parent).driver
        except InputError:
            return parent  # a driver hil has no profile for: the profile says so
    raise RemoteError(
        host,
        f"RDMA device {device}: cannot tell its driver (node_desc "
        f"{desc!r}, no parent device driver); is it an RNIC hil knows?",
    )


DeviceSource = Literal["inventory", "fallback", "create", "missing"]


@dataclass(frozen=True)
class DevicePlan:
    """The RDMA device a port's test uses, and where it comes from.

    ``inventory``: the inventory's ``rdma_device``, present; ``fallback``: the
    ``siw_<netdev>`` fallback, present; ``create``: that fallback, which pair
    setup creates; ``missing``: none.
    """

    device: str | None
    source: DeviceSource

    def driver(self, rnic: Rnic) -> str:
        """The driver the device should run."""
        return rnic.driver if self.source == "inventory" else "siw"


def plan_device(rnic: Rnic, present: set[str]) -> DevicePlan:
    """The device pair setup picks for ``rnic`` among the host's ``present`` devices."""
    if rnic.rdma_device and rnic.rdma_device in present:
        return DevicePlan(rnic.rdma_device, "inventory")
    if rnic.fallback == "siw":
        name = f"siw_{rnic.netdev}"
        return DevicePlan(name, "fallback" if name in present else "create")
    return DevicePlan(None, "missing")


def missing_device(rnic: Rnic, present: list[str], unavailable: str) -> str:
    """Why ``rnic`` has no RDMA device, and what to do."""
    where = f"{rnic.netdev} (port {rnic.name})"
    seen = f"host has: {', '.join(present)}" if present else "the host has no RDMA device"
    if unavailable:
        seen = f"RDMA is unavailable: {unavailable}"
    if rnic.rdma_device is None:
        return (
            f"{where}: the inventory names no rdma_device and no fallback ({seen}); "
            "set rdma_device, or fallback: siw"
        )
    return (
        f"{where}: RDMA device {rnic.rdma_device} is absent ({seen}); is the {rnic.driver} "
        f"driver loaded (modprobe {rnic.driver})? or set fallback: siw"
    )


def rdma_ports(agent: Agent) -> tuple[list[RdmaLink], str]:
    """The host's RDMA ports, and why there are none when RDMA is unavailable."""
    try:
        return agent.rdma_links(), ""
    except AgentCallError as e:
        if e.kind != "rdma_unavailable":
            raise
        return [], str(e)


def device_on_netdev(ports: list[RdmaLink], device: str, netdev: str) -> RdmaLink | None:
    """``device``'s port on ``netdev``, if it has one."""
    return next((p for p in ports if p.device == device and p.netdev == netdev), None)


def wrong_netdev(ports: list[RdmaLink], device: str, netdev: str) -> str:
    """What ``device``'s ports sit on, when none is on ``netdev``."""
    mine = [f"port {p.port} on {p.netdev or 'no netdev'}" for p in ports if p.device == device]
    return f"{device} has no port on {netdev} ({', '.join(mine) or 'no ports'})"


WRONG_NETDEV_FIX = (
    "set the port's netdev to the one its device sits on, or rdma_device to the "
    "device on the netdev (rdma link show)"
)
