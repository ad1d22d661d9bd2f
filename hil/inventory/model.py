"""The inventory's data: hosts, their RNIC ports, the links between them, pairs.

Everything here is a frozen dataclass built by ``hil.inventory.loader`` from
YAML that has already been validated, so code that receives an ``Inventory``
can trust every field.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, TypeVar

from hil import tools
from hil.errors import InputError
from hil.inventory.secret import Secret
from hil.inventory.thresholds import Threshold

IPInterface = ipaddress.IPv4Interface | ipaddress.IPv6Interface

HostKeyPolicy = Literal["strict", "accept-new"]
PullMode = Literal["admin", "blackhole", "carrier", "command"]
PULL_MODES: tuple[PullMode, ...] = ("admin", "blackhole", "carrier", "command")
# Drivers whose iWARP runs over the host kernel's TCP, where the host's
# filters (nftables) and tcpdump see it.  Every hardware iWARP RNIC (iw_cxgb4)
# runs TCP itself: its connections pass the host's stack by.
HOST_TCP_DRIVERS = ("siw",)
CaptureMode = Literal["ends", "host", "command", "none"]
CAPTURE_MODES: tuple[CaptureMode, ...] = ("ends", "host", "command", "none")
# The fields hil fills in a capture command's templates (besides its vars):
# ``id`` names one capture (the same in start, stop and fetch), ``link`` the
# link, and ``pcap`` (fetch only) the file on ``controller`` to write it to.
CAPTURE_FIELDS = ("id", "link")
CAPTURE_FETCH_FIELDS = ("id", "link", "pcap")
# How doctor and pair setup compare a port's ``firmware`` with what the card
# runs: the same text, at least that version (dotted numbers), or only recorded.
FirmwarePolicy = Literal["exact", "min", "record"]
FIRMWARE_POLICIES: tuple[FirmwarePolicy, ...] = ("exact", "min", "record")
# How a host's power is switched: commands on a controller host (a PDU's or a
# BMC's tool), or QEMU's monitor (the virtual lab).
PowerMode = Literal["command", "qmp"]
POWER_MODES: tuple[PowerMode, ...] = ("command", "qmp")
PowerAction = Literal["cycle", "on", "off"]
POWER_ACTIONS: tuple[PowerAction, ...] = ("cycle", "on", "off")
# The field hil fills in a power command's templates (besides its vars): the host's name.
POWER_FIELDS = ("host",)


@dataclass(frozen=True)
class SshConfig:
    """How to reach a host's management address.

    ``host`` may be an alias from ``~/.ssh/config``; ``jump`` names another
    inventory host (or a ``user@host:port`` spec) to tunnel through.
    ``key_passphrase`` unlocks an encrypted ``identity_file``; ``password`` is
    tried when no key is accepted.  Both print as ``$NAME`` or ``<secret>``.
    """

    host: str
    port: int = 22
    user: str = "root"
    identity_file: str | None = None
    jump: str | None = None
    host_key_policy: HostKeyPolicy = "strict"
    known_hosts: str | None = None
    sudo: bool = False
    connect_timeout: float = 10.0
    key_passphrase: Secret | None = None
    password: Secret | None = None


@dataclass(frozen=True)
class Rnic:
    """One RNIC port of a host: a netdev and, usually, an RDMA device on it."""

    name: str
    netdev: str
    driver: str
    rdma_device: str | None = None
    address: IPInterface | None = None
    mtu: int | None = None
    speed: int | None = None  # Mb/s
    firmware: str | None = None
    # "siw": when the hardware RDMA device is absent, create siw on netdev.
    fallback: Literal["siw"] | None = None


@dataclass(frozen=True)
class Power:
    """How to power a host off, on, or cycle it: the host's ``power:``.

    - ``command``: ``cycle``, ``on`` and ``off`` argument lists (``{name}``
      fields from ``vars`` and ``{host}``, the host's name) run over SSH on
      the inventory host ``controller``; a missing ``cycle`` is ``off`` then
      ``on``.
    - ``qmp``: QEMU's monitor socket ``qmp`` (virtual lab): cycle is
      ``system_reset``, off is ``quit``; ``lab``, the lab directory, lets hil
      start a guest whose QEMU is gone (on, or a cycle of a dead guest).

    ``recover`` False keeps hil's recovery from cycling the host by itself
    (``hil host power`` still may).
    """

    mode: PowerMode
    controller: str | None = None
    cycle: tuple[str, ...] = ()
    on: tuple[str, ...] = ()
    off: tuple[str, ...] = ()
    vars: tuple[tuple[str, str], ...] = ()
    qmp: str | None = None
    lab: str | None = None
    recover: bool = True


@dataclass(frozen=True)
class Host:
    """A lab host: how to reach it, what it is, and its RNIC ports."""

    name: str
    ssh: SshConfig
    tags: tuple[str, ...] = ()
    rnics: tuple[Rnic, ...] = ()
    python: str = tools.name("python3")
    # Settings the framework applies at pair setup (and restores after).
    sysctls: tuple[tuple[str, str], ...] = ()
    # Only meaningful where a port names ``firmware`` (the loader refuses it elsewhere).
    firmware_policy: FirmwarePolicy = "exact"
    # How to switch it off, on or cycle it; None: hil cannot.
    power: Power | None = None

    def rnic(self, name: str) -> Rnic:
        """The port called ``name``; KeyError when there is none."""
        for r in self.rnics:
            if r.name == name:
                return r
        raise KeyError(f"host {self.name} has no RNIC port {name!r}")


@dataclass(frozen=True)
class LinkEnd:
    """``host:port`` at one end of a cable."""

    host: str
    port: str

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass(frozen=True)
class Pull:
    """One way to pull a link, with what that way needs.

    - ``admin``: set ``end``'s netdev down through the agent.
    - ``blackhole``: drop all traffic on ``end``'s netdev both ways (tc),
      carrier stays up.
    - ``carrier``: QEMU QMP ``set_link`` on ``qmp`` (a unix socket path on the
      controller) for the guest NIC whose QEMU netdev id is ``qmp_netdev``.
    - ``command``: run ``down`` / ``up`` (argument lists; ``{name}`` fields
      filled from ``vars``) over SSH on the inventory host ``controller``.
    """

    mode: PullMode
    end: LinkEnd | None = None
    qmp: str | None = None
    qmp_netdev: str | None = None
    controller: str | None = None
    down: tuple[str, ...] = ()
    up: tuple[str, ...] = ()
    vars: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class CaptureSpec:
    """Where a link's packets can be captured: the link's ``capture:``.

    - ``ends`` (the default, ``capture:`` absent): tcpdump on each end's own
      netdev; it sees the iWARP traffic only where the provider's TCP runs in
      the host kernel (siw), see :func:`hil.wire.plan.capture_plan`.
    - ``host``: tcpdump on ``netdev`` of the inventory host ``host`` (a
      capture host on a mirror port or an inline tap), reached by SSH.
    - ``command``: a vendor's capture tool: ``start``, ``stop`` and ``fetch``
      argument lists run over SSH on the inventory host ``controller``;
      ``{name}`` fields come from ``vars`` and from hil (``CAPTURE_FIELDS``;
      ``fetch`` writes the capture to ``{pcap}``).
    - ``none``: the link has no usable capture point.
    """

    mode: CaptureMode = "ends"
    host: str | None = None
    netdev: str | None = None
    controller: str | None = None
    start: tuple[str, ...] = ()
    stop: tuple[str, ...] = ()
    fetch: tuple[str, ...] = ()
    vars: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class PinnedParam:
    """A kernel module parameter a link's runs set (``module_params:``): ``driver.name=value``.

    ``value`` is as sysfs prints it (checked against
    :data:`hil.inventory.modparams.MODULE_PARAMS` when loaded).
    """

    driver: str
    name: str
    value: str

    def __str__(self) -> str:
        return f"{self.driver}.{self.name}={self.value}"


@dataclass(frozen=True)
class Link:
    """A named cable between two host ports, the ways to pull it and where to capture it."""

    name: str
    a: LinkEnd
    b: LinkEnd
    pulls: tuple[Pull, ...] = ()
    tags: tuple[str, ...] = ()
    capture: CaptureSpec = CaptureSpec()
    module_params: tuple[PinnedParam, ...] = ()

    def pull(self, mode: PullMode) -> Pull:
        """The pull of ``mode``; KeyError when the link does not offer it."""
        for p in self.pulls:
            if p.mode == mode:
                return p
        offered = ", ".join(p.mode for p in self.pulls) or "none"
        raise KeyError(f"link {self.name} offers no {mode!r} pull (offers: {offered})")


@dataclass(frozen=True)
class Pair:
    """A link with its two hosts: the unit a run reserves."""

    link: Link
    host_a: Host
    host_b: Host

    @property
    def name(self) -> str:
        return self.link.name

    @property
    def hosts(self) -> tuple[Host, Host]:
        return (self.host_a, self.host_b)

    @property
    def rnic_a(self) -> Rnic:
        return self.host_a.rnic(self.link.a.port)

    @property
    def rnic_b(self) -> Rnic:
        return self.host_b.rnic(self.link.b.port)

    @property
    def module_params(self) -> dict[str, dict[str, str]]:
        """The module parameters the pair's runs pin: driver -> {parameter: value}."""
        return params_by_driver(self.link.module_params)


@dataclass(frozen=True)
class Inventory:
    """A validated inventory file."""

    path: Path
    hosts: dict[str, Host] = field(default_factory=dict)
    links: dict[str, Link] = field(default_factory=dict)
    # When the nightly flags a metric (hil/inventory/thresholds.py).
    thresholds: tuple[Threshold, ...] = ()

    def host(self, name: str) -> Host:
        """The host ``name``; InputError naming the known hosts."""
        return _named(self.path, self.hosts, "host", name, InputError)

    def link(self, name: str) -> Link:
        """The link ``name``; InputError naming the known links."""
        return _named(self.path, self.links, "link", name, InputError)

    def pair(self, name: str) -> Pair:
        """The pair of link ``name``; KeyError naming the known pairs."""
        link = _named(self.path, self.links, "pair", name, KeyError)
        return Pair(link, self.hosts[link.a.host], self.hosts[link.b.host])

    def pairs(self) -> list[Pair]:
        """Every pair, in file order."""
        return [self.pair(n) for n in self.links]


def params_by_driver(params: tuple[PinnedParam, ...]) -> dict[str, dict[str, str]]:
    """``params`` as driver -> {parameter: value}, in their order."""
    result: dict[str, dict[str, str]] = {}
    for p in params:
        result.setdefault(p.driver, {})[p.name] = p.value
    return result


T = TypeVar("T")


def _named(path: Path, table: Mapping[str, T], what: str, name: str, error: type[Exception]) -> T:
    """``table[name]``; else ``error`` saying ``PATH: no WHAT 'NAME' (WHATs: the known ones)``."""
    found = table.get(name)
    if found is None:
        known = ", ".join(sorted(table)) or "none"
        raise error(f"{path}: no {what} {name!r} ({what}s: {known})")
    return found
