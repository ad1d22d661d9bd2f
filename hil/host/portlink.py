"""The netdev checks of a port: its firmware, link speed and MTU against the inventory.

The firmware (``ethtool -i``'s ioctl) under the host's ``firmware_policy``
(``exact``, ``min`` or ``record``), the speed sysfs reports, and the MTU a
run will use.  Each is ``info`` when the inventory does not pin it.
"""

from __future__ import annotations

import re

from hil.agent.client import AgentCallError
from hil.errors import RemoteError
from hil.host.checkedport import CheckedPort
from hil.host.findings import Status
from hil.host.rdmadev import SYSFS_NET, read_file

# The leading version of a firmware string: cxgb4 reports "1.27.4.0, TP 0.1.23.2".
FIRMWARE_VERSION = re.compile(r"[0-9]+(?:\.[0-9]+)*")


def check_firmware(port: CheckedPort) -> None:
    """The firmware check: the netdev's driver and firmware under ``firmware_policy``."""
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
    good = firmware_ok(info.firmware, rnic.firmware, policy == "min")
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


def firmware_ok(running: str, wanted: str, at_least: bool) -> bool:
    """``running`` (``1.27.4.0, TP 0.1.23.2``) against ``wanted``: equal, or not older."""
    version = FIRMWARE_VERSION.match(running)
    leading = version.group() if version else ""
    if not at_least:
        return wanted in (running, leading)
    if not leading or not FIRMWARE_VERSION.fullmatch(wanted):
        return False
    as_numbers = [tuple(int(n) for n in v.split(".")) for v in (leading, wanted)]
    return as_numbers[0] >= as_numbers[1]


def check_speed(port: CheckedPort) -> None:
    """The link-speed check: sysfs's speed against the inventory's (unknown without carrier)."""
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
            port.during_setup("warn"),
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


def check_mtu(port: CheckedPort) -> int | None:
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
