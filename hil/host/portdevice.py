"""The RDMA device checks of a port: which device a test will use, its driver, its port.

The inventory's device, or the ``siw_<netdev>`` fallback pair setup uses or
creates (:func:`hil.host.rdmadev.plan_device`); its driver in sysfs against
the port's; and that it has a port on the inventory's netdev, ACTIVE.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hil.errors import RemoteError
from hil.host.checkedport import CheckedPort
from hil.host.rdmadev import (
    WRONG_NETDEV_FIX,
    device_driver,
    device_on_netdev,
    missing_device,
    plan_device,
    rdma_ports,
    wrong_netdev,
)

if TYPE_CHECKING:
    from hil.agent.types import RdmaLink


def check_device(port: CheckedPort) -> str | None:
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


def _driver(port: CheckedPort, device: str, expected: str) -> str | None:
    """The driver check: ``device``'s driver in sysfs against ``expected``; it, or None."""
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


def _device_port(port: CheckedPort, ports: list[RdmaLink], device: str) -> None:
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
            port.during_setup("warn"),
            seen,
            "ACTIVE",
            f"bring {netdev} up with carrier (setup does); check the cable and the far end",
        )
