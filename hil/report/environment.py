"""``environment.properties``: what the run ran on, gathered through each host's agent.

Kernels, RNIC drivers and firmware, rdma-core, the hosts and the pair; Allure
shows it on the overview.  A value that cannot be read is ``unknown (why)``,
so that a half-broken host still gets a report.

    props = gather(hosts, pair)          # hosts: hil.hosts.Hosts (or anything with .agent(name))
    write_properties(alluredir, props)
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from hil.errors import HilError
from hil.inventory.model import Host, Pair, Rnic

if TYPE_CHECKING:
    from hil.agent.types import CommandResult

log = logging.getLogger(__name__)

COMMAND_TIMEOUT = 15.0


class _Runner(Protocol):
    def run(self, argv: list[str], timeout: float = ...) -> CommandResult: ...


class _HostAgents(Protocol):
    def agent(self, name: str) -> _Runner: ...


def _first_line(runner: _Runner, argv: list[str]) -> str:
    """The first output line of a command, or ``unknown (...)`` saying why not."""
    try:
        r = runner.run(argv, timeout=COMMAND_TIMEOUT)
    except HilError as e:
        return f"unknown ({e})"
    text = r.stdout.strip()
    if r.status != 0 or not text:
        why = (r.stderr.strip().splitlines() or [f"exit {r.status}"])[-1]
        return f"unknown ({argv[0]}: {why})"
    return text.splitlines()[0]


def parse_ethtool(text: str) -> dict[str, str]:
    """``ethtool -i`` output as a dict (driver, version, firmware-version, bus-info, ...)."""
    out = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            out[key.strip()] = value.strip()
    return out


def rdma_core_version(runner: _Runner) -> str:
    """rdma-core's package version (Debian, then RPM distributions)."""
    deb = _first_line(runner, ["dpkg-query", "-W", "-f=${Version}", "rdma-core"])
    if not deb.startswith("unknown"):
        return deb
    rpm = _first_line(runner, ["rpm", "-q", "--qf", "%{VERSION}-%{RELEASE}", "rdma-core"])
    return rpm if not rpm.startswith("unknown") else deb


def port_properties(runner: _Runner, host: Host, rnic: Rnic) -> dict[str, str]:
    """Driver, driver version and firmware of one RNIC port, as ethtool reports them."""
    prefix = f"{host.name}.{rnic.netdev}"
    try:
        r = runner.run(["ethtool", "-i", rnic.netdev], timeout=COMMAND_TIMEOUT)
        info = parse_ethtool(r.stdout) if r.status == 0 else {}
        why = (r.stderr.strip().splitlines() or [f"exit {r.status}"])[-1]
    except HilError as e:
        info, why = {}, str(e)
    unknown = "none reported by ethtool" if info else f"unknown (ethtool: {why})"
    return {
        f"{prefix}.driver": info.get("driver") or rnic.driver or unknown,
        f"{prefix}.driver_version": info.get("version") or unknown,
        f"{prefix}.firmware": info.get("firmware-version") or rnic.firmware or unknown,
        f"{prefix}.rdma_device": rnic.rdma_device or (
            f"siw fallback on {rnic.netdev}" if rnic.fallback else "none"),
    }


def host_properties(runner: _Runner, host: Host, rnic: Rnic) -> dict[str, str]:
    """Kernel, rdma-core and the pair port of one host."""
    return {
        f"{host.name}.kernel": _first_line(runner, ["uname", "-r"]),
        f"{host.name}.rdma-core": rdma_core_version(runner),
        **port_properties(runner, host, rnic),
    }


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
            runner = hosts.agent(host.name)
        except HilError as e:
            props[f"{host.name}.error"] = f"no agent: {e}"
            continue
        props.update(host_properties(runner, host, rnic))
    return props


def _escape(text: str) -> str:
    """Java properties escaping for keys and values (backslash, newlines, separators)."""
    return (text.replace("\\", "\\\\").replace("\n", "\\n").replace("=", "\\=")
            .replace(":", "\\:"))


def write_properties(alluredir: Path, props: Mapping[str, str], append: bool = False) -> Path:
    """Write ``environment.properties`` into the results directory (keys sorted).

    ``append`` adds to what is there (the pipelines add the metric trends).
    """
    path = alluredir / "environment.properties"
    with path.open("a" if append else "w") as f:
        f.write("".join(f"{_escape(k)}={_escape(v)}\n" for k, v in sorted(props.items())))
    return path
