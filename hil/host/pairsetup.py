"""Setup of a reserved pair: each RNIC port brought to the inventory's state.

``setup_pair(hosts, pair, journal)`` applies, on each of the pair's two
hosts, the host's sysctls, the port's mtu, link up and its address (added
when missing; other addresses are left alone), waits for carrier, checks
that A reaches B over the data addresses, and picks each port's RDMA device:
the inventory's ``rdma_device`` when the host has it (its driver in sysfs
the port's, one of its ports on the port's netdev), else a siw device
``siw_<netdev>`` when the port says ``fallback: siw``, else an error naming
the host, the netdev and what is missing.  Then the pair's readiness
(:mod:`hil.host.readiness`) is checked on the configured ports and a
failing finding refuses the pair, each with its fix.  Every change is
journaled before it is made, so teardown (or the next reservation) puts the
host back.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from hil import tools
from hil.agent.client import AgentCallError
from hil.errors import NotReady, RemoteError, WaitTimeout
from hil.host.journal import agent_undo
from hil.host.pairstate import PairState, PortState
from hil.host.rdmadev import (
    WRONG_NETDEV_FIX,
    device_driver,
    device_on_netdev,
    missing_device,
    plan_device,
    rdma_ports,
    wrong_netdev,
)
from hil.host.readiness import pair_readiness
from hil.inventory.model import Family, Host, Pair, Rnic

if TYPE_CHECKING:
    from hil.agent import Agent
    from hil.agent.types import RdmaLink
    from hil.host.hosts import Hosts
    from hil.host.journal import Journal

# PairState and PortState live in hil.host.pairstate; callers may keep taking them from here.
__all__ = ["PairState", "PortState", "setup_pair"]

log = logging.getLogger(__name__)

CARRIER_TIMEOUT = 15.0
REACH_TIMEOUT = 10.0


def setup_pair(
    hosts: Hosts,
    pair: Pair,
    journal: Journal,
    *,
    rdma: bool = True,
    reach_timeout: float = REACH_TIMEOUT,
) -> PairState:
    """Bring ``pair`` to the inventory's state, journaling every change.

    ``rdma=False`` skips picking RDMA devices (hosts without RDMA, such as
    the netns lab).  Raises ``RemoteError`` naming host and netdev when a
    port cannot be configured, reached, or given an RDMA device, and
    ``NotReady`` listing the failing readiness findings with their fixes.
    """
    sides = ((pair.host_a, pair.rnic_a), (pair.host_b, pair.rnic_b))
    for host, rnic in sides:
        _apply_sysctls(hosts.agent(host.name), journal, host)
        _configure_port(hosts.agent(host.name), journal, host, rnic)
    peers = (pair.host_b.name, pair.host_a.name)
    mtus = [
        _wait_carrier(hosts.agent(h.name), h, r, peer)
        for (h, r), peer in zip(sides, peers, strict=True)
    ]
    reached = _check_reach(hosts, pair, reach_timeout)
    devices = [
        _pick_rdma(hosts.agent(h.name), journal, h, r) if rdma else (None, False) for h, r in sides
    ]
    a, b = (
        PortState(h.name, r.name, r.netdev, str(r.address) if r.address else None, mtu, *dev)
        for (h, r), mtu, dev in zip(sides, mtus, devices, strict=True)
    )
    readiness = pair_readiness(hosts, pair, "setup", rdma=rdma)
    if not readiness.ok:
        raise NotReady(readiness.refusal())
    log.info("pair %s set up: %s, %s", pair.name, a, b)
    return PairState(pair.name, a, b, reached)


def _apply_sysctls(agent: Agent, journal: Journal, host: Host) -> None:
    for name, value in host.sysctls:
        old = agent.sysctl(name)
        if old.split() == str(value).split():
            continue
        undo = agent_undo("sysctl_set", f"restore sysctl {name}={old}", name=name, value=old)
        journal.change(host.name, undo)
        agent.set_sysctl(name, value)


def _configure_port(agent: Agent, journal: Journal, host: Host, rnic: Rnic) -> None:
    netdev = rnic.netdev
    try:
        info = agent.link(netdev)
    except AgentCallError as e:
        if e.kind != "not_found":
            raise
        raise RemoteError(
            host.name,
            f"port {rnic.name}: no netdev {netdev!r} on the host; check the inventory's "
            f"netdev and that the {rnic.driver} driver is loaded",
        ) from None
    if rnic.mtu is not None and info.mtu != rnic.mtu:
        what = f"restore mtu {info.mtu} on {netdev}"
        journal.change(host.name, agent_undo("set_link", what, netdev=netdev, mtu=info.mtu))
        agent.set_link(netdev, mtu=rnic.mtu)
    if not info.up:
        what = f"set {netdev} down again"
        journal.change(host.name, agent_undo("set_link", what, netdev=netdev, up=False))
        agent.set_link(netdev, up=True)
    if rnic.address6 is not None:
        _keep_ipv6_on_down(agent, journal, host, netdev)
    _add_addresses(agent, journal, host, rnic)


def _keep_ipv6_on_down(agent: Agent, journal: Journal, host: Host, netdev: str) -> None:
    """Keep the port's IPv6 addresses when its link goes down.

    By default Linux flushes an interface's IPv6 addresses, static ones included, when
    it goes administratively down (Documentation/networking/ip-sysctl.rst,
    ``keep_addr_on_down``: 0, the default, removes them): an admin link pull would take
    ``address6`` with it and every later IPv6 test would fail.  Set per port, journaled.
    """
    name = f"net/ipv6/conf/{netdev}/keep_addr_on_down"  # slashes: a netdev may hold dots
    old = agent.sysctl(name)
    if old.strip() == "1":
        return
    undo = agent_undo("sysctl_set", f"restore sysctl {name}={old}", name=name, value=old)
    journal.change(host.name, undo)
    agent.set_sysctl(name, "1")


def _add_addresses(agent: Agent, journal: Journal, host: Host, rnic: Rnic) -> None:
    """Give the port its inventory addresses (``address``, ``address6``) it lacks, each
    removal journaled first, so a killed run's replay removes it too."""
    wanted = [a for a in (rnic.address, rnic.address6) if a is not None]
    if not wanted:
        return
    present = {a.address for a in agent.addresses(rnic.netdev)}
    for address in wanted:
        if address in present:
            continue
        undo = agent_undo(
            "delete_address",
            f"remove {address} from {rnic.netdev}",
            netdev=rnic.netdev,
            address=str(address),
        )
        undo["missing_ok"] = True
        journal.change(host.name, undo)
        agent.add_address(rnic.netdev, address)


def _wait_carrier(agent: Agent, host: Host, rnic: Rnic, peer: str) -> int:
    """Wait for carrier on the port; returns its mtu."""
    try:
        return agent.wait_link(rnic.netdev, carrier=True, timeout=CARRIER_TIMEOUT).mtu
    except WaitTimeout as e:
        raise RemoteError(
            host.name,
            f"{rnic.netdev} (port {rnic.name}) has no carrier after {CARRIER_TIMEOUT:g}s "
            f"({e}); check the cable to {peer} and the port at its far end",
        ) from None


def _check_reach(hosts: Hosts, pair: Pair, timeout: float) -> bool:
    """Ping B's data address of every family the pair offers from A's port; False when
    the pair offers none (a port without an address in the inventory)."""
    if not pair.families:
        log.warning("pair %s: a port has no address in the inventory; reach not checked", pair.name)
        return False
    for family in pair.families:
        _ping(hosts, pair, family, timeout)
    return True


def _ping(hosts: Hosts, pair: Pair, family: Family, timeout: float) -> None:
    ra, rb = pair.rnic_a, pair.rnic_b
    source, dest = ra.address_of(family), rb.address_of(family)
    assert source is not None and dest is not None  # in pair.families
    target = str(dest.ip)
    # iputils ping picks ICMPv6 for an IPv6 target by itself (ping(8), -4/-6).
    argv = tools.argv(
        "ping", "-n", "-c", "1", "-w", f"{max(1, round(timeout))}", "-I", ra.netdev, target
    )
    result = hosts.agent(pair.host_a.name).run(argv, timeout=timeout + 5)
    if result.status != 0:
        seen = (result.stdout + result.stderr).strip().splitlines()[-2:]
        raise RemoteError(
            pair.host_a.name,
            f"cannot reach {pair.host_b.name} at {target} from {ra.netdev} ({source}) "
            f"within {timeout:g}s ({' / '.join(seen)}); check the cable, both addresses "
            "and prefixes, and any firewall on the data path",
        )


def _pick_rdma(agent: Agent, journal: Journal, host: Host, rnic: Rnic) -> tuple[str, bool]:
    """The port's RDMA device and whether setup created it."""
    ports, unavailable = rdma_ports(agent)
    plan = plan_device(rnic, {p.device for p in ports})
    if plan.source == "inventory" and plan.device:
        _check_device(agent, host, rnic, ports, plan.device)
        return plan.device, False
    if plan.source == "fallback" and plan.device:
        return plan.device, False
    if plan.source == "create" and plan.device:
        name = plan.device
        undo = agent_undo("rdma_delete_link", f"delete siw device {name}", name=name)
        undo["missing_ok"] = True
        entry = journal.change(host.name, undo)
        try:
            agent.add_siw(name, rnic.netdev)
        except AgentCallError as e:
            journal.forget(entry)
            raise RemoteError(
                host.name,
                f"{rnic.netdev} (port {rnic.name}): cannot create siw device {name} ({e}); "
                "does the kernel have siw (modprobe siw)?",
            ) from None
        return name, True
    present = sorted({p.device for p in ports})
    raise RemoteError(host.name, missing_device(rnic, present, unavailable))


def _check_device(agent: Agent, host: Host, rnic: Rnic, ports: list[RdmaLink], device: str) -> None:
    """The inventory's device runs the port's driver and has a port on its netdev."""
    where = f"{rnic.netdev} (port {rnic.name})"
    driver = device_driver(agent, host.name, device)
    if driver != rnic.driver:
        raise RemoteError(
            host.name,
            f"{where}: RDMA device {device} runs {driver}, the inventory says {rnic.driver}; "
            "correct the port's rdma_device or driver, or load the right driver",
        )
    if device_on_netdev(ports, device, rnic.netdev) is None:
        raise RemoteError(
            host.name, f"{where}: {wrong_netdev(ports, device, rnic.netdev)}; {WRONG_NETDEV_FIX}"
        )
