"""Which provider a set-up pair really runs, and the contract profile that judges it.

Read on both hosts, never taken from the inventory: the RDMA device pair
setup chose (the inventory's, or a siw fallback it created), that device's
driver (its ``node_desc`` in sysfs, else the driver of its parent device,
matched against the registered providers of :mod:`hil.judge.profiles`; irdma,
which has no ``node_desc``, by its PCI function's driver ``ice`` or ``i40e``), and
the settings that shape the provider's profile (``net.ipv4.tcp_retries2``
for siw, iw_cxgb4's ``ep_timeout_secs``).  Each host gets the profile of its
own driver and settings; a pair whose hosts' profiles differ (a mixed pair,
siw on one side and iw_cxgb4 on the other, or different ``ep_timeout_secs``)
is judged by a :class:`~hil.judge.profiles.PairProfile` holding both.  An
irdma device in RoCEv2 mode is refused (:class:`~hil.errors.NotReady`) with
the devlink commands that switch it to iWARP (:mod:`hil.host.irdmadev`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from hil import tools
from hil.errors import InputError, NotReady, RemoteError
from hil.host.irdmadev import IRDMA, roce_refusal
from hil.host.rdmadev import device_driver, read_file
from hil.judge.profiles import PROVIDERS, Profile, Profiles, ProviderSpec, pair_profile, profile_for

if TYPE_CHECKING:
    from hil.agent import Agent
    from hil.host.hosts import Hosts
    from hil.host.pairsetup import PairState, PortState
    from hil.inventory.model import Pair, Rnic
    from hil.run.request import Progress


KALLSYMS = "/proc/kallsyms"
KALLSYMS_S = 30.0  # a grep of some 100,000 lines on a slow guest


@dataclass(frozen=True)
class HostProvider:
    """What one host of the pair runs: its device, that device's driver, its settings."""

    host: str
    rdma_device: str
    driver: str
    fallback: bool  # not the inventory's device: pair setup's siw fallback
    settings: dict[str, str] = field(default_factory=dict)
    claimed: str = ""  # the inventory's driver for the port, shown beside the truth

    @property
    def profile(self) -> Profile:
        """This host's contract profile; InputError for a driver with no profile."""
        return profile_for(self.driver, **{k: self._number(k, v) for k, v in self.settings.items()})

    def _number(self, name: str, value: str) -> int:
        try:
            return int(value)
        except ValueError:
            raise RemoteError(self.host, f"{name} is not a number: {value!r}") from None

    def note(self) -> str:
        """How the host's driver differs from the inventory's claim ("" when it does not)."""
        if self.fallback:
            return f"{self.driver} fallback on {self.host}: the inventory says {self.claimed}"
        if self.claimed and self.driver != self.claimed:
            return f"{self.host}'s device runs {self.driver}: the inventory says {self.claimed}"
        return ""


@dataclass(frozen=True)
class Provider:
    """What both hosts of a pair run; each host's profile is built from its own settings."""

    hosts: tuple[HostProvider, HostProvider]

    @property
    def mixed(self) -> bool:
        """True when the two hosts run different drivers."""
        return self.hosts[0].driver != self.hosts[1].driver

    @property
    def driver(self) -> str:
        """The pair's driver (``siw+iw_cxgb4`` for a mixed pair, end A first)."""
        a, b = self.hosts
        return a.driver if not self.mixed else f"{a.driver}+{b.driver}"

    @property
    def profile(self) -> Profiles:
        """The profiles that judge the pair: one when both hosts get the same, else each
        host's own (:class:`~hil.judge.profiles.PairProfile`); InputError for a driver
        with no profile."""
        a, b = self.hosts
        return pair_profile(((a.host, a.profile), (b.host, b.profile)))

    def describe(self, pair: str) -> str:
        """One line for the session output: what each host runs, and any siw fallback."""
        a, b = self.hosts
        if self.mixed:
            runs = f"runs {a.driver} on {a.host} and {b.driver} on {b.host}"
        else:
            runs = f"runs {a.driver} on both hosts"
        notes = [h.note() for h in self.hosts if h.note()]
        if len(notes) == 2 and a.fallback and b.fallback and a.claimed == b.claimed:
            notes = [f"{a.driver} fallback: the inventory says {a.claimed}"]
        return f"pair {pair} {runs}" + (f" ({'; '.join(notes)})" if notes else "")


def _setting(agent: Agent, host: str, where: str, functions: frozenset[str]) -> str:
    """One setting of a provider, read where its spec says (``functions``: those of its
    ``kallsyms:`` settings the kernel has)."""
    if where.startswith("sysctl:"):
        return agent.sysctl(where.removeprefix("sysctl:"))
    if where.startswith("kallsyms:"):
        return "1" if where.removeprefix("kallsyms:") in functions else "0"
    return read_file(agent, host, where)


def _functions(agent: Agent, host: str, names: list[str]) -> frozenset[str]:
    """Which of functions ``names`` ``/proc/kallsyms`` lists (a module's too, once loaded),
    in one read: a guest's kallsyms is some 100,000 lines; RemoteError when the host has
    none to read."""
    if not names:
        return frozenset()
    patterns = [arg for name in names for arg in ("-e", name)]
    got = agent.run(tools.argv("grep", "-o", "-w", "-F", *patterns, KALLSYMS), timeout=KALLSYMS_S)
    if got.status not in (0, 1):  # grep: 1 no line matched, 2 an error
        raise RemoteError(host, f"reading {KALLSYMS} failed: {got.stderr.strip()}")
    return frozenset(got.stdout.split()) & frozenset(names)


def _settings(agent: Agent, host: str, driver: str) -> dict[str, str]:
    spec: ProviderSpec | None = PROVIDERS.get(driver)
    if spec is None:
        return {}
    wanted = [
        w.removeprefix("kallsyms:") for w in spec.settings.values() if w.startswith("kallsyms:")
    ]
    functions = _functions(agent, host, wanted)
    return {name: _setting(agent, host, where, functions) for name, where in spec.settings.items()}


def _host_provider(hosts: Hosts, port: PortState, rnic: Rnic) -> HostProvider:
    if port.rdma_device is None:
        raise InputError(
            f"pair setup on {port.host} chose no RDMA device (set up with "
            "rdma=False): there is no provider to judge"
        )
    agent = hosts.agent(port.host)
    driver = device_driver(agent, port.host, port.rdma_device)
    # irdma runs iWARP or RoCEv2 on one device (ice's choice); a contract
    # profile of iWARP would judge RoCE connections that are none of it.
    refusal = roce_refusal(agent, port.host, port.rdma_device) if driver == IRDMA else ""
    if refusal:
        raise NotReady(refusal)
    return HostProvider(
        port.host,
        port.rdma_device,
        driver,
        port.rdma_device != rnic.rdma_device,
        _settings(agent, port.host, driver),
        rnic.driver,
    )


def detect(hosts: Hosts, pair: Pair, state: PairState) -> Provider:
    """What both hosts of a set-up pair run (their devices, drivers and settings)."""
    return Provider(
        (_host_provider(hosts, state.a, pair.rnic_a), _host_provider(hosts, state.b, pair.rnic_b))
    )


def announce(provider: Provider, pair: str, progress: Progress | None, log: logging.Logger) -> None:
    """What ``pair`` really runs, in the progress output and in the run's ``log``: ``pair
    lab-0-1 runs siw on both hosts (siw fallback: the inventory says iw_cxgb4); judged by
    ...``."""
    line = f"{provider.describe(pair)}; judged by profile {provider.profile.name}"
    if progress is not None:
        progress(line)
    # A host that does not run what the inventory says is worth a warning in the log.
    differs = any(h.note() for h in provider.hosts)
    log.log(logging.WARNING if differs else logging.INFO, "%s", line)
