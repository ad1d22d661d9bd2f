"""The inventory's data: hosts, their RNIC ports, the links between them, pairs.

Everything here is a frozen dataclass built by ``hil.inventory.loader`` from
YAML that has already been validated, so code that receives an ``Inventory``
can trust every field.  The hosts' dataclasses live in
:mod:`hil.inventory.hostmodel`, the links' in :mod:`hil.inventory.linkmodel`;
this module holds the pair and the inventory, and names them all.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from hil.errors import InputError
from hil.inventory.hostmodel import (
    FAMILIES,
    FIRMWARE_POLICIES,
    POWER_ACTIONS,
    POWER_FIELDS,
    POWER_MODES,
    Family,
    FirmwarePolicy,
    Host,
    HostKeyPolicy,
    IPInterface,
    Power,
    PowerAction,
    PowerMode,
    Rnic,
    SshConfig,
)
from hil.inventory.linkmodel import (
    CAPTURE_FETCH_FIELDS,
    CAPTURE_FIELDS,
    CAPTURE_MODES,
    HOST_TCP_DRIVERS,
    IMPAIR_FIELDS,
    IMPAIR_MODES,
    PULL_MODES,
    CaptureMode,
    CaptureSpec,
    ImpairMode,
    ImpairSpec,
    Link,
    LinkEnd,
    PeerSpec,
    PinnedDevlink,
    PinnedParam,
    Pull,
    PullMode,
    params_by_driver,
)
from hil.inventory.thresholds import Threshold


@dataclass(frozen=True)
class Pair:
    """A link with its two hosts: the unit a run reserves."""

    link: Link
    host_a: Host
    host_b: Host
    # The hosts the link's ``peer:`` entries name, in their order (hil.inventory.peers).
    peer_hosts: tuple[Host, ...] = ()

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
    def families(self) -> tuple[Family, ...]:
        """The address families both ends have an address of: what the pair's CM runs use."""
        return tuple(f for f in self.rnic_a.families if f in self.rnic_b.families)

    @property
    def module_params(self) -> dict[str, dict[str, str]]:
        """The module parameters the pair's runs pin: driver -> {parameter: value}."""
        return params_by_driver(self.link.module_params)

    @property
    def devlink_params(self) -> dict[str, str]:
        """The devlink parameters the pair's runs pin on each irdma end: name -> value."""
        return {p.name: p.value for p in self.link.devlink_params}


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
        peers = tuple(self.hosts[p.host] for p in link.peers)
        return Pair(link, self.hosts[link.a.host], self.hosts[link.b.host], peers)

    def pairs(self) -> list[Pair]:
        """Every pair, in file order."""
        return [self.pair(n) for n in self.links]


T = TypeVar("T")


def _named(path: Path, table: Mapping[str, T], what: str, name: str, error: type[Exception]) -> T:
    """``table[name]``; else ``error`` saying ``PATH: no WHAT 'NAME' (WHATs: the known ones)``."""
    found = table.get(name)
    if found is None:
        known = ", ".join(sorted(table)) or "none"
        raise error(f"{path}: no {what} {name!r} ({what}s: {known})")
    return found


__all__ = [
    "CAPTURE_FETCH_FIELDS",
    "CAPTURE_FIELDS",
    "CAPTURE_MODES",
    "CaptureMode",
    "CaptureSpec",
    "FAMILIES",
    "FIRMWARE_POLICIES",
    "FirmwarePolicy",
    "HOST_TCP_DRIVERS",
    "Host",
    "HostKeyPolicy",
    "IMPAIR_FIELDS",
    "IMPAIR_MODES",
    "ImpairMode",
    "ImpairSpec",
    "Family",
    "IPInterface",
    "Inventory",
    "Link",
    "LinkEnd",
    "POWER_ACTIONS",
    "POWER_FIELDS",
    "POWER_MODES",
    "PULL_MODES",
    "Pair",
    "PeerSpec",
    "PinnedDevlink",
    "PinnedParam",
    "Power",
    "PowerAction",
    "PowerMode",
    "Pull",
    "PullMode",
    "Rnic",
    "SshConfig",
    "params_by_driver",
]
