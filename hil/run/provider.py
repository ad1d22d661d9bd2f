"""Which provider a set-up pair really runs, and the contract profile that judges it.

Read on both hosts, never taken from the inventory: the RDMA device pair
setup chose (the inventory's, or a siw fallback it created), that device's
driver (its ``node_desc`` in sysfs, else the driver of its parent device,
matched against the registered providers of :mod:`hil.judge.profiles`), and
the settings that shape the provider's profile (``net.ipv4.tcp_retries2``
for siw, iw_cxgb4's ``ep_timeout_secs``).  Where the two hosts differ, the
profile takes the larger value: it bounds when the slower end must have
answered.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from hil import tools
from hil.errors import InputError, RemoteError
from hil.judge.profiles import PROVIDERS, Profile, ProviderSpec, profile_for, provider_named

if TYPE_CHECKING:
    from hil.agent import Agent
    from hil.host.hosts import Hosts
    from hil.host.pairsetup import PairState, PortState
    from hil.inventory.model import Pair, Rnic

SYSFS_IB = "/sys/class/infiniband"
READ_TIMEOUT = 15.0


@dataclass(frozen=True)
class HostProvider:
    """What one host of the pair runs: its device, that device's driver, its settings."""

    host: str
    rdma_device: str
    driver: str
    fallback: bool  # not the inventory's device: pair setup's siw fallback
    settings: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Provider:
    """What both hosts of a pair run; its profile is built from their settings."""

    hosts: tuple[HostProvider, HostProvider]

    @property
    def mixed(self) -> bool:
        """True when the two hosts run different drivers."""
        return self.hosts[0].driver != self.hosts[1].driver

    @property
    def driver(self) -> str:
        """The pair's driver (``siw+iw_cxgb4`` for a mixed pair)."""
        a, b = self.hosts
        return a.driver if not self.mixed else f"{a.driver}+{b.driver}"

    @property
    def profile(self) -> Profile:
        """The contract profile; InputError for a mixed pair or a driver with no profile."""
        a, b = self.hosts
        if self.mixed:
            raise InputError(
                f"pair runs {a.driver} on {a.host} and {b.driver} on {b.host}: "
                "no contract profile judges a mixed pair; give both ports the "
                "same driver or the same fallback"
            )
        names = {name for h in self.hosts for name in h.settings}
        return profile_for(a.driver, **{name: self._largest(name) for name in names})

    def _largest(self, name: str) -> int:
        values = [h.settings[name] for h in self.hosts if name in h.settings]
        try:
            return max(int(v) for v in values)
        except ValueError:
            raise RemoteError(
                self.hosts[0].host,
                f"{name} is not a number on the pair's hosts: {', '.join(values)}",
            ) from None


def _read(agent: Agent, host: str, path: str) -> str:
    """A sysfs file's content, stripped; RemoteError naming host and file when unreadable."""
    r = agent.run(tools.argv("cat", path), timeout=READ_TIMEOUT)
    if r.status != 0:
        why = (r.stderr.strip().splitlines() or [f"exit {r.status}"])[-1]
        raise RemoteError(host, f"cannot read {path} ({why})")
    return r.stdout.strip()


def device_driver(agent: Agent, host: str, device: str) -> str:
    """The provider behind RDMA device ``device`` on ``host``, as sysfs tells it."""
    base = posixpath.join(SYSFS_IB, device)
    desc = _read(agent, host, posixpath.join(base, "node_desc"))
    for spec in PROVIDERS.values():
        if desc.startswith(spec.node_desc):
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


def _setting(agent: Agent, host: str, where: str) -> str:
    """One setting of a provider, read where its spec says."""
    if where.startswith("sysctl:"):
        return agent.sysctl(where.removeprefix("sysctl:"))
    return _read(agent, host, where)


def _settings(agent: Agent, host: str, driver: str) -> dict[str, str]:
    spec: ProviderSpec | None = PROVIDERS.get(driver)
    if spec is None:
        return {}
    return {name: _setting(agent, host, where) for name, where in spec.settings.items()}


def _host_provider(hosts: Hosts, port: PortState, rnic: Rnic) -> HostProvider:
    if port.rdma_device is None:
        raise InputError(
            f"pair setup on {port.host} chose no RDMA device (set up with "
            "rdma=False): there is no provider to judge"
        )
    agent = hosts.agent(port.host)
    driver = device_driver(agent, port.host, port.rdma_device)
    return HostProvider(
        port.host,
        port.rdma_device,
        driver,
        port.rdma_device != rnic.rdma_device,
        _settings(agent, port.host, driver),
    )


def detect(hosts: Hosts, pair: Pair, state: PairState) -> Provider:
    """What both hosts of a set-up pair run (their devices, drivers and settings)."""
    return Provider(
        (_host_provider(hosts, state.a, pair.rnic_a), _host_provider(hosts, state.b, pair.rnic_b))
    )
