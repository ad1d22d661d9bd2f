"""What the agent's typed calls return: frozen data, no pyroute2 objects.

Each is made from its reply as ``hil.agent.protocol`` declares it
(``from_wire``); the wire keeps plain JSON.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from hil.agent.protocol import AddressReply, KmsgReadReply, LinkReply
from hil.inventory.model import IPInterface
from hil.ssh.session import Result


@dataclass(frozen=True)
class LinkInfo:
    """A network link as rtnetlink reports it."""

    name: str
    index: int
    mtu: int
    operstate: str  # UP, DOWN, LOWERLAYERDOWN, UNKNOWN, ...
    carrier: bool
    up: bool  # administratively up (IFF_UP)
    mac: str | None
    kind: str | None  # veth, dummy, ... (None for physical NICs)

    @classmethod
    def from_wire(cls, d: LinkReply) -> LinkInfo:
        return cls(**d)  # the reply's keys are these fields


@dataclass(frozen=True)
class AddressInfo:
    """An address of a link, with its prefix."""

    netdev: str
    address: IPInterface
    scope: int  # 0 global, 253 link, 254 host

    @classmethod
    def from_wire(cls, d: AddressReply) -> AddressInfo:
        return cls(
            netdev=d["netdev"], address=ipaddress.ip_interface(d["address"]), scope=d["scope"]
        )


@dataclass(frozen=True)
class DriverInfo:
    """A netdev's driver as the kernel reports it (``SIOCETHTOOL``, what ``ethtool -i`` shows).

    A field the driver leaves empty is ``""`` (veth has no firmware or bus).
    """

    netdev: str
    driver: str
    version: str
    firmware: str
    bus_info: str


# A finished command on a host: the agent's ``run`` answers with the same record
# as a command run over SSH.
CommandResult = Result


@dataclass(frozen=True)
class RdmaDevice:
    """An RDMA device (``rdma dev show``)."""

    name: str
    index: int
    node_type: str | None
    fw: str | None
    node_guid: str | None


@dataclass(frozen=True)
class RdmaLink:
    """A port of an RDMA device and the netdev under it (``rdma link show``)."""

    device: str
    port: int
    state: str | None
    physical_state: str | None
    netdev: str | None


@dataclass(frozen=True)
class KmsgRecord:
    """One kernel log record."""

    seq: int
    usec: int  # since boot
    priority: int  # 0 emerg .. 7 debug
    facility: int
    message: str


@dataclass(frozen=True)
class KernelLog:
    """What the kernel logged since a cursor; ``lost`` counts overwritten records."""

    records: tuple[KmsgRecord, ...]
    lost: int

    @classmethod
    def from_wire(cls, d: KmsgReadReply) -> KernelLog:
        return cls(tuple(KmsgRecord(**r) for r in d["records"]), d["lost"])

    def messages(self) -> list[str]:
        """Just the message texts, in order."""
        return [r.message for r in self.records]
