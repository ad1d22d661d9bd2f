"""The inventory's hosts: how to reach one, its RNIC ports, and how to switch its power.

Frozen dataclasses built by :mod:`hil.inventory.hosts` (and
:mod:`hil.inventory.rnics`, :mod:`hil.inventory.power`) from validated YAML;
:mod:`hil.inventory.model` names them with the links and pairs.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Literal

from hil import tools
from hil.inventory.secret import Secret

IPInterface = ipaddress.IPv4Interface | ipaddress.IPv6Interface
# The address families a port can offer the CM runner; each suite test runs once per
# family its pair's link offers (hil.plugin.fixtures).
Family = Literal["ipv4", "ipv6"]
FAMILIES: tuple[Family, ...] = ("ipv4", "ipv6")
HostKeyPolicy = Literal["strict", "accept-new"]
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
    # The port's IPv6 address beside an IPv4 ``address`` (docs/inventory.md).
    address6: ipaddress.IPv6Interface | None = None
    mtu: int | None = None
    speed: int | None = None  # Mb/s
    firmware: str | None = None
    # "siw": when the hardware RDMA device is absent, create siw on netdev.
    fallback: Literal["siw"] | None = None

    def address_of(self, family: Family) -> IPInterface | None:
        """The port's address of ``family``: ``address6`` or an IPv6 ``address`` for
        ipv6, an IPv4 ``address`` for ipv4; None when it has none."""
        if family == "ipv6" and self.address6 is not None:
            return self.address6
        wanted = 6 if family == "ipv6" else 4
        if self.address is not None and self.address.version == wanted:
            return self.address
        return None

    @property
    def families(self) -> tuple[Family, ...]:
        """The address families the port has an address of, IPv4 first."""
        return tuple(f for f in FAMILIES if self.address_of(f) is not None)


@dataclass(frozen=True)
class Power:
    """How to power a host off, on, or cycle it: the host's ``power:``.

    - ``command``: ``cycle``, ``on`` and ``off`` argument lists (``{name}``
      fields from ``vars`` and ``{host}``, the host's name) run over SSH on
      the inventory host ``controller``; a missing ``cycle`` is ``off`` then
      ``on``.
    - ``qmp``: QEMU's monitor socket ``qmp`` (virtual lab): off is ``quit``;
      ``lab``, the lab directory, lets hil start the guest again (on), and
      makes a cycle its QEMU stopped and started again; without it a cycle is
      ``system_reset``.

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
