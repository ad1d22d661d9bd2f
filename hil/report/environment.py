"""``environment.properties``: what the run ran on, gathered through each host's agent.

Kernels, the pair's ports (driver, driver version and firmware as the kernel
reports them, the RDMA devices on the netdev), the module parameters hil
knows of the port's driver (``t6-a.iw_cxgb4.ep_timeout_secs``: read on the
host after setup, so pinned ones show the value set), an irdma port's devlink
parameters (``e810a.devlink.enable_iwarp``, likewise), rdma-core, the hosts
and the pair; Allure shows it on the overview.  Every value is an observation: one
that cannot be read is ``unknown: <what> failed on <host>: <why>``, never the
inventory's claim (that is shown apart, as ``<host>.<netdev>.inventory``), so
a half-broken host still gets a report and a reader sees what was not seen.

    props = gather(hosts, pair)   # hosts: hil.host.hosts.Hosts (or anything with .agent(name))
    write_properties(alluredir, props)
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol

from hil import tools
from hil.agent.client import AgentCallError
from hil.errors import HilError, RemoteError
from hil.host.devlinkparams import read_devlink
from hil.host.irdmadev import pci_function
from hil.host.modparams import read_params
from hil.host.rdmadev import rdma_core_version
from hil.inventory.devlinkparams import DEVLINK_DRIVER
from hil.inventory.model import Host, Pair, Rnic
from hil.inventory.modparams import MODULE_PARAMS

if TYPE_CHECKING:
    from hil.agent.agent import Runner
    from hil.agent.types import CommandResult, DriverInfo, RdmaLink

log = logging.getLogger(__name__)

COMMAND_TIMEOUT = 15.0
NONE_REPORTED = "none reported by the driver"


class _HostAgent(Protocol):
    def run(self, argv: list[str], timeout: float = ...) -> CommandResult: ...

    def driver_info(self, netdev: str) -> DriverInfo: ...

    def rdma_links(self, timeout: float = ...) -> list[RdmaLink]: ...


class _HostAgents(Protocol):
    def agent(self, name: str) -> _HostAgent: ...


def unknown(host: str, what: str, why: str) -> str:
    """How a value that could not be observed is reported: what failed, where, why."""
    return f"unknown: {what} failed on {host}: {why}"


def _reason(e: HilError, host: str) -> str:
    """An error's message without the host (``unknown`` names it) or the agent method."""
    text = str(e)
    if isinstance(e, RemoteError) and text.startswith(f"{e.host}: "):
        text = text[len(e.host) + 2 :]
    if isinstance(e, AgentCallError) and text.startswith(f"agent {e.method}: "):
        text = text[len(e.method) + 8 :]
    return text


def _first_line(runner: Runner, host: str, argv: list[str]) -> str:
    """The first output line of a command, or ``unknown: ...`` saying why not."""
    what = " ".join(argv[:2]) if argv[1:2] and argv[1].startswith("-") else argv[0]
    try:
        r = runner.run(argv, timeout=COMMAND_TIMEOUT)
    except HilError as e:
        return unknown(host, what, _reason(e, host))
    text = r.stdout.strip()
    if r.status != 0 or not text:
        why = (r.stderr.strip().splitlines() or [f"exit {r.status}, no output"])[-1]
        return unknown(host, what, why)
    return text.splitlines()[0]


def rdma_core_property(agent: Runner, host: str) -> str:
    """rdma-core's version on ``host``, or ``unknown: ...`` saying why not."""
    try:
        return rdma_core_version(agent, host)
    except HilError as e:
        return unknown(host, "rdma-core version", _reason(e, host))


def driver_properties(agent: _HostAgent, host: str, prefix: str, netdev: str) -> dict[str, str]:
    """Driver, driver version and firmware of ``netdev``, as the kernel reports them."""
    keys = ("driver", "driver_version", "firmware")
    try:
        info = agent.driver_info(netdev)
    except HilError as e:
        why = unknown(host, "SIOCETHTOOL", _reason(e, host))
        return {f"{prefix}.{key}": why for key in keys}
    values = (info.driver, info.version, info.firmware)
    return {
        f"{prefix}.{key}": value or NONE_REPORTED for key, value in zip(keys, values, strict=True)
    }


def rdma_devices_on(agent: _HostAgent, host: str, netdev: str) -> str:
    """The RDMA devices whose port sits on ``netdev`` (``rdma link show``), comma-separated."""
    try:
        ports = agent.rdma_links(timeout=COMMAND_TIMEOUT)
    except HilError as e:
        return unknown(host, "rdma link show", _reason(e, host))
    devices = sorted({p.device for p in ports if p.netdev == netdev})
    return ", ".join(devices) or f"none on {netdev}"


def claimed(rnic: Rnic) -> str:
    """What the inventory says of a port: shown beside the observations, never for them."""
    parts = [
        f"driver {rnic.driver}",
        f"rdma_device {rnic.rdma_device or '-'}",
        f"fallback {rnic.fallback or '-'}",
        f"firmware {rnic.firmware or '-'}",
    ]
    return ", ".join(parts)


def port_properties(agent: _HostAgent, host: Host, rnic: Rnic) -> dict[str, str]:
    """One RNIC port: its driver and firmware, its RDMA devices, and the inventory's claim."""
    prefix = f"{host.name}.{rnic.netdev}"
    return {
        **driver_properties(agent, host.name, prefix, rnic.netdev),
        f"{prefix}.rdma_device": rdma_devices_on(agent, host.name, rnic.netdev),
        f"{prefix}.inventory": claimed(rnic),
    }


def module_properties(agent: _HostAgent, host: str, driver: str) -> dict[str, str]:
    """The parameters hil knows of ``driver`` on ``host`` (``HOST.DRIVER.NAME``), as read
    there: the pinned ones as a run set them, the others as the host had them."""
    try:
        values = read_params(agent, host, driver)
    except HilError as e:
        return {f"{host}.{driver}": unknown(host, "reading module parameters", _reason(e, host))}
    return {f"{host}.{driver}.{name}": value for name, value in values.items()}


def devlink_properties(agent: Runner, host: str, rnic: Rnic) -> dict[str, str]:
    """An irdma port's PCI function's devlink parameters (``HOST.devlink.NAME``: value and
    cmode), as read there: the pinned ones as a run set them; {} for other drivers."""
    if rnic.driver != DEVLINK_DRIVER or rnic.rdma_device is None:
        return {}
    try:
        handle = f"pci/{pci_function(agent, host, rnic.rdma_device)}"
        values = read_devlink(agent, host, handle)
    except HilError as e:
        return {f"{host}.devlink": unknown(host, "reading devlink parameters", _reason(e, host))}
    return {f"{host}.devlink.{n}": f"{v} ({cmode})" for n, (v, cmode) in values.items()}


def host_properties(agent: _HostAgent, host: Host, rnic: Rnic) -> dict[str, str]:
    """Kernel, rdma-core, the pair port of one host, its driver's module parameters and
    (irdma) its devlink parameters."""
    return {
        f"{host.name}.kernel": _first_line(agent, host.name, tools.argv("uname", "-r")),
        f"{host.name}.rdma-core": rdma_core_property(agent, host.name),
        **port_properties(agent, host, rnic),
        **module_properties(agent, host.name, rnic.driver),
        **devlink_properties(agent, host.name, rnic),
    }


def unreachable_properties(host: Host, rnic: Rnic, why: str) -> dict[str, str]:
    """The same keys as ``host_properties`` for a host whose agent did not start."""
    prefix = f"{host.name}.{rnic.netdev}"
    value = unknown(host.name, "starting the agent", why)
    keys = (
        "kernel",
        "rdma-core",
        *(f"{rnic.netdev}.{k}" for k in ("driver", "driver_version", "firmware", "rdma_device")),
    )
    if MODULE_PARAMS.get(rnic.driver):
        keys = (*keys, rnic.driver)
    return {**{f"{host.name}.{k}": value for k in keys}, f"{prefix}.inventory": claimed(rnic)}


def gather(hosts: _HostAgents, pair: Pair) -> dict[str, str]:
    """Properties of the reserved pair and both of its hosts, read through their agents."""
    props = {
        "pair": pair.name,
        "host.a": f"{pair.host_a.name} ({pair.host_a.ssh.host}) port {pair.link.a.port}",
        "host.b": f"{pair.host_b.name} ({pair.host_b.ssh.host}) port {pair.link.b.port}",
        "pull.modes": ",".join(p.mode for p in pair.link.pulls) or "none",
    }
    for host, rnic in ((pair.host_a, pair.rnic_a), (pair.host_b, pair.rnic_b)):
        try:
            agent = hosts.agent(host.name)
        except HilError as e:
            log.warning("environment of %s not read: %s", host.name, e)
            props.update(unreachable_properties(host, rnic, _reason(e, host.name)))
            continue
        props.update(host_properties(agent, host, rnic))
    return props


def _escape(text: str) -> str:
    """Java properties escaping for keys and values (backslash, newlines, separators)."""
    return text.replace("\\", "\\\\").replace("\n", "\\n").replace("=", "\\=").replace(":", "\\:")


def write_properties(
    alluredir: Path, props: Mapping[str, str], where: Literal["new", "end", "top"] = "new"
) -> Path:
    """Write ``environment.properties`` into the results directory (keys sorted).

    ``end`` adds to what is there (the pipelines add the metric trends), ``top`` before
    it: the overview shows the first few lines and hides the rest behind "Show all"
    (the pipelines put the flaky tests there).
    """
    path = alluredir / "environment.properties"
    text = "".join(f"{_escape(k)}={_escape(v)}\n" for k, v in sorted(props.items()))
    before = path.read_text() if where != "new" and path.is_file() else ""
    path.write_text(text + before if where == "top" else before + text)
    return path


_UNESCAPED = {"n": "\n"}


def read_properties(path: Path) -> dict[str, str]:
    """``environment.properties`` read back (what :func:`write_properties` wrote; a key
    given twice: the last wins, as Java's Properties.load); {} when there is none."""
    if not path.is_file():
        return {}
    props = {}
    for line in path.read_text().splitlines():
        key, value, where, escaped = "", "", "key", False
        for ch in line:
            if escaped:
                ch, escaped = _UNESCAPED.get(ch, ch), False
            elif ch == "\\":
                escaped = True
                continue
            elif ch == "=" and where == "key":
                where = "value"
                continue
            if where == "key":
                key += ch
            else:
                value += ch
        if where == "value":
            props[key] = value
    return props
