"""The readiness checks of one RNIC port (:mod:`hil.host.readiness`).

The RDMA device a test will use (the inventory's, or the ``siw_<netdev>``
fallback pair setup uses or creates), its driver in sysfs, that it has a
port on the inventory's netdev and the port's state, the netdev's driver and
firmware (``ethtool -i``'s ioctl) under the host's ``firmware_policy``, its
link speed and MTU, iwpmd where the provider needs it, and the provider's
module parameters.  Everything is read; nothing is changed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from hil import tools
from hil.agent.client import AgentCallError
from hil.errors import RemoteError
from hil.host.findings import Finding, Phase, Status
from hil.host.modparams import read_params
from hil.host.rdmadev import (
    READ_TIMEOUT,
    SYSFS_NET,
    WRONG_NETDEV_FIX,
    device_driver,
    device_on_netdev,
    missing_device,
    plan_device,
    rdma_core_version,
    rdma_ports,
    read_file,
    wrong_netdev,
)
from hil.inventory.modparams import MODULE_PARAMS

if TYPE_CHECKING:
    from hil.agent import Agent
    from hil.agent.types import RdmaLink
    from hil.inventory.model import Host, Rnic


# Whether a provider's connections need iwpmd, the iWARP port mapper.  The
# kernel's iw_cm_map (drivers/infiniband/core/iwcm.c) asks iwpmd to map every
# iWARP connection's port; iwpmd reserves it in the host's TCP port space, so
# a TCP-offloading RNIC (iw_cxgb4) and host sockets cannot take the same port.
# Without iwpmd the mapping is skipped and the kernel logs
# "iwpm_register_pid: Unable to send a nlmsg".  siw runs on the host's own TCP
# sockets and says so: siw_main.c sets IW_F_NO_PORT_MAP.
NEEDS_IWPMD: dict[str, bool] = {"iw_cxgb4": True, "siw": False}
IWPMD_FIX = (
    "start it (systemctl enable --now iwpmd; it comes with rdma-core): without it "
    "the offloaded connections' ports are not reserved on the host"
)
# The leading version of a firmware string: cxgb4 reports "1.27.4.0, TP 0.1.23.2".
FIRMWARE_VERSION = re.compile(r"[0-9]+(?:\.[0-9]+)*")


@dataclass(frozen=True)
class PortView:
    """What the port's checks saw that the pair's checks compare between the ends."""

    host: str
    driver: str | None  # the device's driver (None: unknown)
    mtu: int | None  # the MTU a run uses: the inventory's (setup sets it), else the current
    params: dict[str, str] | None = field(default=None)  # the driver's parameters; None: unread


@dataclass
class _Port:
    """One port being checked: where findings go."""

    agent: Agent
    host: Host
    rnic: Rnic
    phase: Phase
    findings: list[Finding] = field(default_factory=list)

    def add(self, check: str, status: Status, seen: str, expected: str = "", fix: str = "") -> None:
        port = self.rnic.name if len(self.host.rnics) > 1 else ""
        self.findings.append(Finding(check, self.host.name, status, seen, expected, fix, port))

    def _during_setup(self, doctor: Status) -> Status:
        """``fail`` once setup has configured the port; ``doctor`` before."""
        return "fail" if self.phase == "setup" else doctor


def check_port(
    agent: Agent, host: Host, rnic: Rnic, phase: Phase, rdma: bool = True
) -> tuple[list[Finding], PortView]:
    """The findings for ``rnic`` of ``host`` and what the pair checks need.

    ``rdma=False`` checks the network part only (hosts without RDMA).
    """
    port = _Port(agent, host, rnic, phase)
    driver = _device(port) if rdma else None
    _firmware(port)
    _speed(port)
    mtu = _mtu(port)
    if driver is None:
        return port.findings, PortView(host.name, None, mtu)
    _iwpmd(port, driver)
    return port.findings, PortView(host.name, driver, mtu, _params(port, driver))


def _device(port: _Port) -> str | None:
    """The device and driver checks; the driver the test will run (None: none or unknown)."""
    rnic = port.rnic
    ports, unavailable = rdma_ports(port.agent)
    plan = plan_device(rnic, {p.device for p in ports})
    expected = plan.driver(rnic)
    if unavailable and plan.source == "create":
        port.add(
            "rdma-device",
            "fail",
            f"{plan.device} (siw fallback) cannot be created: RDMA is unavailable: {unavailable}",
            fix="boot a kernel with RDMA netlink and siw (modprobe siw), or use an RNIC",
        )
        return None
    if plan.source == "missing" or plan.device is None:
        present = sorted({p.device for p in ports})
        port.add("rdma-device", "fail", missing_device(rnic, present, unavailable))
        return None
    if plan.source == "create":
        why = f"the inventory's {rnic.rdma_device} is absent; " if rnic.rdma_device else ""
        port.add("rdma-device", "info", f"{plan.device}: {why}created at setup (siw fallback)")
        port.add("device-driver", "info", "siw (the fallback setup creates)")
        return "siw"
    if plan.source == "fallback" and rnic.rdma_device:
        port.add(
            "rdma-device",
            "warn",
            f"{plan.device} (siw fallback): the inventory's {rnic.rdma_device} is absent",
            rnic.rdma_device,
            f"load {rnic.driver} (modprobe {rnic.driver}) to test it; runs are labelled siw",
        )
    else:
        port.add("rdma-device", "ok", plan.device)
    driver = _driver(port, plan.device, expected)
    _device_port(port, ports, plan.device)
    return driver


def _driver(port: _Port, device: str, expected: str) -> str | None:
    try:
        driver = device_driver(port.agent, port.host.name, device)
    except RemoteError as e:
        port.add("device-driver", "fail", str(e), expected, "check the device in sysfs")
        return None
    if driver != expected:
        port.add(
            "device-driver",
            "fail",
            f"{device} runs {driver}",
            expected,
            f"port {port.rnic.name} says {expected}: correct its rdma_device or driver "
            "in the inventory, or load the right driver",
        )
    else:
        port.add("device-driver", "ok", f"{device} runs {driver}")
    return driver


def _device_port(port: _Port, ports: list[RdmaLink], device: str) -> None:
    netdev = port.rnic.netdev
    found = device_on_netdev(ports, device, netdev)
    if found is None:
        seen = wrong_netdev(ports, device, netdev)
        port.add("device-port", "fail", seen, f"a port on {netdev}", WRONG_NETDEV_FIX)
        return
    seen = f"{device}/{found.port} on {netdev}: {found.state} ({found.physical_state})"
    if found.state == "ACTIVE":
        port.add("device-port", "ok", seen)
    else:
        port.add(
            "device-port",
            port._during_setup("warn"),
            seen,
            "ACTIVE",
            f"bring {netdev} up with carrier (setup does); check the cable and the far end",
        )


def _firmware(port: _Port) -> None:
    rnic, policy = port.rnic, port.host.firmware_policy
    try:
        info = port.agent.driver_info(rnic.netdev)
    except AgentCallError as e:
        status: Status = "fail" if rnic.firmware and policy != "record" else "warn"
        port.add(
            "firmware", status, f"cannot read {rnic.netdev}'s driver ({e})", rnic.firmware or ""
        )
        return
    seen = f"{info.driver} {info.version}, firmware {info.firmware or 'none reported'}"
    if rnic.firmware is None:
        port.add("firmware", "info", seen, fix="pin it: firmware in the inventory's port")
        return
    if policy == "record":
        port.add("firmware", "info", seen, f"{rnic.firmware} (recorded only)")
        return
    good = _firmware_ok(info.firmware, rnic.firmware, policy == "min")
    expected = rnic.firmware if policy == "exact" else f"at least {rnic.firmware}"
    if good:
        port.add("firmware", "ok", seen, expected)
        return
    port.add(
        "firmware",
        "fail",
        seen,
        expected,
        f"flash firmware {rnic.firmware} on {rnic.netdev}'s card, or correct the inventory's "
        f"firmware (firmware_policy {policy})",
    )


def _firmware_ok(running: str, wanted: str, at_least: bool) -> bool:
    """``running`` (``1.27.4.0, TP 0.1.23.2``) against ``wanted``: equal, or not older."""
    version = FIRMWARE_VERSION.match(running)
    leading = version.group() if version else ""
    if not at_least:
        return wanted in (running, leading)
    if not leading or not FIRMWARE_VERSION.fullmatch(wanted):
        return False
    as_numbers = [tuple(int(n) for n in v.split(".")) for v in (leading, wanted)]
    return as_numbers[0] >= as_numbers[1]


def _speed(port: _Port) -> None:
    netdev, wanted = port.rnic.netdev, port.rnic.speed
    try:
        text = read_file(port.agent, port.host.name, f"{SYSFS_NET}/{netdev}/speed")
        speed = int(text)
    except (RemoteError, ValueError):
        speed = -1  # the link is down (EINVAL) or the driver does not say
    if wanted is None:
        seen = f"{speed} Mb/s" if speed > 0 else "unknown"
        port.add("link-speed", "info", seen, fix="pin it: speed in the inventory's port")
    elif speed <= 0:
        port.add(
            "link-speed",
            port._during_setup("warn"),
            f"unknown on {netdev} (no carrier?)",
            f"{wanted} Mb/s",
            f"bring {netdev} up with carrier (setup does) and check the cable",
        )
    elif speed < wanted:
        port.add(
            "link-speed",
            "fail",
            f"{speed} Mb/s on {netdev}",
            f"{wanted} Mb/s",
            f"check the cable, transceiver and switch port (ethtool {netdev} shows the "
            "negotiated modes), or lower the inventory's speed",
        )
    elif speed > wanted:
        port.add(
            "link-speed",
            "warn",
            f"{speed} Mb/s on {netdev}",
            f"{wanted} Mb/s",
            "raise the inventory's speed",
        )
    else:
        port.add("link-speed", "ok", f"{speed} Mb/s on {netdev}", f"{wanted} Mb/s")


def _mtu(port: _Port) -> int | None:
    """The MTU check; the MTU a run will use."""
    netdev, wanted = port.rnic.netdev, port.rnic.mtu
    try:
        now = port.agent.link(netdev).mtu
    except AgentCallError as e:
        if e.kind != "not_found":
            raise
        port.add(
            "netdev",
            "fail",
            f"no netdev {netdev}",
            fix=f"check the inventory's netdev and that the {port.rnic.driver} driver is loaded",
        )
        return wanted
    if wanted is None:
        port.add("mtu", "info", f"{now} on {netdev}", fix="pin it: mtu in the inventory's port")
        return now
    if now == wanted:
        port.add("mtu", "ok", f"{now} on {netdev}", str(wanted))
    elif port.phase == "doctor":
        port.add("mtu", "info", f"{now} on {netdev}", str(wanted), "pair setup sets it")
    else:
        port.add(
            "mtu", "fail", f"{now} on {netdev}", str(wanted), f"the driver refused mtu {wanted}"
        )
    return wanted


def _iwpmd(port: _Port, driver: str) -> None:
    needs = NEEDS_IWPMD.get(driver)
    r = port.agent.run(tools.argv("pgrep", "-x", "iwpmd"), timeout=READ_TIMEOUT)
    pids = r.stdout.split()
    running = r.status == 0 and bool(pids)
    if needs is False:
        state = "running" if running else "not running"
        port.add("iwpmd", "info", f"{state}; not needed: {driver} maps no ports (IW_F_NO_PORT_MAP)")
        return
    if r.status not in (0, 1):
        why = (r.stderr.strip().splitlines() or [f"exit {r.status}"])[-1]
        port.add("iwpmd", "fail", f"cannot tell whether iwpmd runs ({why})", "running", IWPMD_FIX)
    elif not running:
        status: Status = "fail" if needs else "warn"
        port.add("iwpmd", status, "not running", f"running ({driver} maps its ports)", IWPMD_FIX)
    else:
        try:
            version = rdma_core_version(port.agent, port.host.name)
        except RemoteError:
            version = "unknown"
        port.add("iwpmd", "ok", f"running (pid {', '.join(pids)}), rdma-core {version}")


def _params(port: _Port, driver: str) -> dict[str, str] | None:
    if not MODULE_PARAMS.get(driver):
        return {}
    try:
        values = read_params(port.agent, port.host.name, driver)
    except RemoteError as e:
        port.add("module-params", "fail", str(e), fix=f"load {driver} (modprobe {driver})")
        return None
    known = MODULE_PARAMS[driver]
    changed = [f"{n}={v}" for n, v in values.items() if known[n].default != v]
    seen = f"{driver}: {len(values)} read; " + (
        f"not the default: {', '.join(changed)}" if changed else "all at their defaults"
    )
    port.add("module-params", "info", seen)
    return values
