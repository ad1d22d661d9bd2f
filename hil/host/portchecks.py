"""The readiness checks of one RNIC port (:mod:`hil.host.readiness`).

The RDMA device a test will use (the inventory's, or the ``siw_<netdev>``
fallback pair setup uses or creates), its driver in sysfs, that it has a
port on the inventory's netdev and the port's state, the netdev's driver and
firmware (``ethtool -i``'s ioctl) under the host's ``firmware_policy``, its
link speed and MTU, iwpmd where the provider needs it, and the provider's
module parameters; an irdma port also :mod:`hil.host.irdmachecks`'s.
Everything is read; nothing is changed.

The device checks are :mod:`hil.host.portdevice`'s, the firmware, speed and
MTU checks :mod:`hil.host.portlink`'s, the port they add findings to
:mod:`hil.host.checkedport`'s; iwpmd and the module parameters are here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from hil import tools
from hil.errors import RemoteError
from hil.host.checkedport import CheckedPort
from hil.host.findings import Finding, Phase, Status
from hil.host.irdmachecks import DevlinkParams, check_irdma
from hil.host.irdmadev import IRDMA
from hil.host.modparams import read_params
from hil.host.portdevice import check_device
from hil.host.portlink import check_firmware, check_mtu, check_speed
from hil.host.rdmadev import READ_TIMEOUT, rdma_core_version
from hil.inventory.modparams import MODULE_PARAMS

if TYPE_CHECKING:
    from hil.agent import Agent
    from hil.inventory.model import Host, Rnic


# Whether a provider's connections need iwpmd, the iWARP port mapper.  The
# kernel's iw_cm_map (drivers/infiniband/core/iwcm.c) asks iwpmd to map every
# iWARP connection's port; iwpmd reserves it in the host's TCP port space, so
# a TCP-offloading RNIC (iw_cxgb4) and host sockets cannot take the same port.
# Without iwpmd the mapping is skipped and the kernel logs
# "iwpm_register_pid: Unable to send a nlmsg".  siw runs on the host's own TCP
# sockets and says so: siw_main.c sets IW_F_NO_PORT_MAP.
# irdma sets no IW_F_NO_PORT_MAP (drivers/infiniband/hw/irdma, 6.1 and 6.12):
# it offloads TCP as iw_cxgb4 does, and iw_cm maps its ports.
NEEDS_IWPMD: dict[str, bool] = {"iw_cxgb4": True, "irdma": True, "siw": False}
IWPMD_FIX = (
    "start it (systemctl enable --now iwpmd; it comes with rdma-core): without it "
    "the offloaded connections' ports are not reserved on the host"
)


@dataclass(frozen=True)
class PortView:
    """What the port's checks saw that the pair's checks compare between the ends."""

    host: str
    driver: str | None  # the device's driver (None: unknown)
    mtu: int | None  # the MTU a run uses: the inventory's (setup sets it), else the current
    params: dict[str, str] | None = field(default=None)  # the driver's parameters; None: unread
    devlink: DevlinkParams | None = None  # an irdma port's PCI function's devlink parameters


def check_port(
    agent: Agent, host: Host, rnic: Rnic, phase: Phase, rdma: bool = True
) -> tuple[list[Finding], PortView]:
    """The findings for ``rnic`` of ``host`` and what the pair checks need.

    ``rdma=False`` checks the network part only (hosts without RDMA).
    """
    port = CheckedPort(agent, host, rnic, phase)
    driver = check_device(port) if rdma else None
    check_firmware(port)
    check_speed(port)
    mtu = check_mtu(port)
    if driver is None:
        return port.findings, PortView(host.name, None, mtu)
    _iwpmd(port, driver)
    devlink = check_irdma(port, rnic.rdma_device) if driver == IRDMA and rnic.rdma_device else None
    return port.findings, PortView(host.name, driver, mtu, _params(port, driver), devlink)


def _iwpmd(port: CheckedPort, driver: str) -> None:
    needs = NEEDS_IWPMD.get(driver)
    r = port.agent.run(tools.argv("pgrep", "-x", "iwpmd"), timeout=READ_TIMEOUT)
    pids = r.stdout.split()
    running = r.status == 0 and bool(pids)
    if needs is False:
        state = "running" if running else "not running"
        port.add("iwpmd", "info", f"{state}; not needed: {driver} maps no ports (IW_F_NO_PORT_MAP)")
        return
    if r.status not in (0, 1):
        why = r.why()
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


def _params(port: CheckedPort, driver: str) -> dict[str, str] | None:
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
