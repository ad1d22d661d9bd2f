"""The readiness checks of an irdma port (Intel E810 through ``ice``, X722 through ``i40e``).

Beside the checks every port gets (:mod:`hil.host.portchecks`: device,
firmware from ``ethtool -i``, speed, MTU, iwpmd), an irdma port is checked
for what only it has: that its device runs iWARP (``node_type``) and ice's
devlink parameters ``enable_iwarp``/``enable_roce`` say so, the NVM versions
``devlink dev info`` shows (and a flashed NVM still waiting for a reboot),
and which ice and irdma drivers are loaded.  Everything is read; nothing is
changed: the RDMA mode is switched (it unplugs the RDMA device) only by pair
setup, when the link pins it (``devlink_params``, :mod:`hil.host.devlinkparams`).
Sources: Linux 6.1 and 6.12, ``drivers/net/ethernet/intel/ice`` and
``drivers/infiniband/hw/irdma``.
"""

from __future__ import annotations

import json
import posixpath
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from hil import tools
from hil.agent.client import AgentCallError
from hil.errors import RemoteError
from hil.host.devlinkparams import parse_values
from hil.host.irdmadev import IWARP_NODE_TYPE, pci_function, switch_to_iwarp
from hil.host.rdmadev import READ_TIMEOUT, SYSFS_IB, read_file

if TYPE_CHECKING:
    from hil.host.checkedport import CheckedPort

# ``devlink dev info``'s running versions worth a row, each named as ice's
# ice_devlink_info_get table names it (devlink/devlink.c in 6.12, ice_devlink.c in 6.1).
NVM_VERSIONS = (
    ("fw.psid.api", "NVM"),  # ice_info_nvm_ver: "%x.%02x", ethtool -i's first field
    ("fw.bundle_id", "EETRACK"),  # ice_info_eetrack
    ("fw.mgmt", "firmware"),  # ice_info_fw_mgmt
    ("fw.undi", "UNDI"),  # ice_info_orom_ver
    ("fw.app", "DDP"),  # ice_info_ddp_pkg_version
)
# Intel's out-of-tree irdma chooses RoCEv2 with this parameter (inferred from
# its README: the in-tree driver has no module_param at all in 6.1 and 6.12).
OUT_OF_TREE_ROCE = "/sys/module/irdma/parameters/roce_ena"
IRDMA_VERSION = "/sys/module/irdma/version"  # MODULE_VERSION: out-of-tree only


@dataclass(frozen=True)
class DevlinkParams:
    """A PCI function's devlink parameters: ``pci/BDF`` and name -> ``value (cmode)``."""

    handle: str
    values: dict[str, str]


def check_irdma(port: CheckedPort, device: str) -> DevlinkParams | None:
    """The irdma checks of ``port`` (RDMA device ``device``); its devlink parameters, when read."""
    try:
        bdf = pci_function(port.agent, port.host.name, device)
    except RemoteError as e:
        port.add("rdma-mode", "fail", str(e), "iWARP", "check the device in sysfs")
        return None
    params = _devlink(port, "param", "show").get("param", {}).get(f"pci/{bdf}")
    devlink = DevlinkParams(f"pci/{bdf}", _param_values(params)) if params else None
    _rdma_mode(port, device, bdf, devlink)
    _nvm(port, bdf)
    _drivers(port)
    return devlink


def _devlink(port: CheckedPort, *args: str) -> dict[str, Any]:
    """``devlink -j ARGS``'s JSON; {} (and a warning) when devlink cannot say."""
    r = port.agent.run(tools.argv("devlink", "-j", "dev", *args), timeout=READ_TIMEOUT)
    try:
        found: dict[str, Any] = json.loads(r.stdout) if r.status == 0 else {}
    except ValueError:
        found = {}
    if not found:
        why = r.why() if r.status != 0 else f"not JSON: {r.stdout[:60]!r}"
        port.add(
            f"devlink-{args[0]}",
            "warn",
            f"cannot read devlink dev {' '.join(args)} ({why})",
            fix="install iproute2 (devlink) on the host",
        )
    return found


def _param_values(params: list[dict[str, Any]]) -> dict[str, str]:
    """``{"enable_iwarp": "true (runtime)", ...}`` from devlink's JSON list of parameters."""
    return {name: f"{value} ({cmode})" for name, (value, cmode) in parse_values(params).items()}


def _rdma_mode(port: CheckedPort, device: str, bdf: str, devlink: DevlinkParams | None) -> None:
    """iWARP, as the device registered it (``node_type``) and as ice's parameters say."""
    host = port.host.name
    node_type = read_file(port.agent, host, posixpath.join(SYSFS_IB, device, "node_type"))
    values = devlink.values if devlink else {}
    # i40e (X722, iWARP only) has no such parameters: node_type alone tells
    said = {n: values[n] for n in ("enable_iwarp", "enable_roce") if n in values}
    seen = f"{device}: node_type {node_type}" + "".join(f", {n} {v}" for n, v in said.items())
    iwarp_on = said.get("enable_iwarp", "true").startswith("true")
    if node_type == IWARP_NODE_TYPE and iwarp_on:
        port.add("rdma-mode", "ok", f"iWARP ({seen})")
        return
    port.add(
        "rdma-mode",
        "fail",
        f"not iWARP: {seen}",
        f"iWARP ({IWARP_NODE_TYPE}, enable_iwarp true)",
        f"on {host}: {switch_to_iwarp(bdf)} (hil switches it only when the link pins it: "
        "devlink_params: {enable_roce: false, enable_iwarp: true}; it is runtime only, so "
        "set it again after a reboot or a reload of ice)",
    )


def _nvm(port: CheckedPort, bdf: str) -> None:
    """The NVM versions ``devlink dev info`` shows; a flashed one that waits for a reboot."""
    info = _devlink(port, "info").get("info", {}).get(f"pci/{bdf}")
    if not info:
        return
    running, stored = info["versions"].get("running", {}), info["versions"].get("stored", {})
    seen = ", ".join(f"{label} {running[key]}" for key, label in NVM_VERSIONS if key in running)
    pending = [k for k, _ in NVM_VERSIONS if k in stored and stored[k] != running.get(k)]
    if pending:
        port.add(
            "nvm",
            "warn",
            f"{seen}; flashed, not running: " + ", ".join(f"{k} {stored[k]}" for k in pending),
            f"the running NVM is the flashed one ({info.get('driver', 'ice')})",
            "reboot the host (or devlink dev reload) to run the flashed NVM; the firmware "
            "check judges the running one",
        )
        return
    port.add("nvm", "info", seen or "devlink shows no running versions")


def _drivers(port: CheckedPort) -> None:
    """Which ice and irdma run: in-tree (the kernel's release) or Intel's out-of-tree ones."""
    host = port.host.name
    try:
        info = port.agent.driver_info(port.rnic.netdev)
    except AgentCallError:
        return  # the firmware check names it
    version = port.agent.run(tools.argv("cat", IRDMA_VERSION), timeout=READ_TIMEOUT)
    irdma = f"irdma {version.stdout.strip()}" if version.status == 0 else "irdma in-tree"
    seen = f"{info.driver} {info.version}, {irdma}"
    roce = port.agent.run(tools.argv("cat", OUT_OF_TREE_ROCE), timeout=READ_TIMEOUT)
    if roce.status != 0:
        port.add("rdma-drivers", "info", seen)
        return
    value = roce.stdout.strip()
    if value in ("0", "N"):
        port.add("rdma-drivers", "info", f"{seen}, roce_ena {value}")
        return
    port.add(
        "rdma-drivers",
        "fail",
        f"{seen}, roce_ena {value}: the out-of-tree irdma runs RoCEv2",
        "roce_ena 0",
        f"on {host}: options irdma roce_ena=0 in /etc/modprobe.d/irdma.conf, then "
        "rmmod irdma; modprobe irdma (a load-time parameter)",
    )
