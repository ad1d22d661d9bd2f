"""The ``rnics:`` list of an inventory host: its RNIC ports, and its ``firmware_policy``.

Each port names its netdev, driver and, optionally, its RDMA device,
address (and an IPv6 ``address6`` beside an IPv4 one), MTU, speed and
firmware (docs/inventory.md); ``firmware_policy min`` needs firmware
versions it can compare.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable

from hil.inventory.model import FIRMWARE_POLICIES, IPInterface, Rnic
from hil.inventory.nodes import (
    NAME,
    NAME_WHAT,
    NETDEV,
    NETDEV_WHAT,
    At,
    choice,
    entries,
    fields,
    integer,
    matching,
    read_given,
    sequence,
    text,
)

RNIC_KEYS = (
    "name", "netdev", "driver", "rdma_device", "address", "address6",
    "mtu", "speed", "firmware", "fallback",
)  # fmt: skip
_DRIVER = re.compile(r"[a-z0-9_]+")
# A version ``firmware_policy: min`` can compare: dotted numbers, like 1.27.4.0.
FIRMWARE_VERSION = re.compile(r"[0-9]+(?:\.[0-9]+)*")
_SPEED_MAX = 10_000_000  # Mb/s: 10 Tb/s, far beyond any RNIC, catches unit slips


def parse_rnics(at: At | None) -> tuple[Rnic, ...]:
    """A host's ``rnics:`` list; port names and netdevs unique within the host."""
    if at is None or at.is_null:
        return ()
    rnics: list[Rnic] = []
    lines: dict[str, int] = {}
    netdevs: dict[str, str] = {}
    addresses6: dict[object, str] = {}
    for item in sequence(at):
        rnic = _rnic(item)
        _unique_address6(item, rnic, addresses6)
        if rnic.name in lines:
            raise item.error(
                f"duplicate RNIC port name {rnic.name!r} (first at line {lines[rnic.name]})"
            )
        if rnic.netdev in netdevs:
            raise item.error(
                f"netdev {rnic.netdev!r} is already port {netdevs[rnic.netdev]!r} of this host"
            )
        lines[rnic.name] = item.line
        netdevs[rnic.netdev] = rnic.name
        rnics.append(rnic)
    return tuple(rnics)


def _rnic(at: At) -> Rnic:
    f = fields(at, RNIC_KEYS, required=("name", "netdev", "driver"))
    readers: dict[str, Callable[[At], object]] = {
        "name": lambda a: matching(a, NAME, NAME_WHAT),
        "netdev": lambda a: matching(a, NETDEV, NETDEV_WHAT),
        "driver": lambda a: matching(a, _DRIVER, "a driver name (like iw_cxgb4 or siw)"),
        "rdma_device": lambda a: matching(a, NAME, "an RDMA device name (like cxgb4_0)"),
        "address": _interface,
        "address6": _interface6,
        "mtu": lambda a: integer(a, 68, 65535),
        "speed": lambda a: integer(a, 1, _SPEED_MAX),
        "firmware": text,
        "fallback": lambda a: choice(a, ("siw",)),
    }
    rnic = Rnic(**read_given(f, readers))  # type: ignore[arg-type]
    if rnic.address6 is not None and rnic.address is not None and rnic.address.version == 6:
        raise f["address6"].error(
            f"address {rnic.address} is IPv6 already; address6 is the IPv6 address beside "
            "an IPv4 address: give address an IPv4 address or drop address6"
        )
    return rnic


def _unique_address6(at: At, rnic: Rnic, seen: dict[object, str]) -> None:
    """Refuse an IPv6 address a port of the same host has already."""
    if rnic.address6 is None:
        return
    ip = rnic.address6.ip
    if ip in seen:
        raise entries(at)["address6"].error(
            f"{ip} is already the address6 of port {seen[ip]!r} of this host; "
            "each port needs its own address"
        )
    seen[ip] = rnic.name


def firmware_policy(at: At, rnics_at: At | None, rnics: tuple[Rnic, ...]) -> str:
    """A host's ``firmware_policy``: it needs a port naming ``firmware``, and ``min``
    needs versions it can compare."""
    policy = choice(at, FIRMWARE_POLICIES)
    named = [(i, r) for i, r in enumerate(rnics) if r.firmware is not None]
    if not named:
        raise at.error(
            "firmware_policy says how to compare a port's firmware with what the card runs, "
            "but no RNIC port of this host names firmware; add firmware to a port or drop "
            "firmware_policy"
        )
    if policy == "min" and rnics_at is not None:
        for i, rnic in named:
            if not FIRMWARE_VERSION.fullmatch(rnic.firmware or ""):
                where = entries(sequence(rnics_at)[i])["firmware"]
                raise where.error(
                    f"firmware_policy min compares dotted version numbers (like 1.27.4.0), "
                    f"got {rnic.firmware!r}"
                )
    return policy


def _interface(at: At) -> IPInterface:
    value = text(at)
    try:
        address = ipaddress.ip_interface(value)
    except ValueError:
        raise at.error(f"{value!r} is not an IP network") from None
    if "/" not in value:
        raise at.error(f"{value!r} has no prefix length (write ADDRESS/PREFIX, like {value}/24)")
    return address


def _interface6(at: At) -> ipaddress.IPv6Interface:
    value = text(at)
    try:
        address = ipaddress.ip_interface(value)
    except ValueError:
        raise at.error(f"{value!r} is not an IPv6 address with prefix (like fd00::1/64)") from None
    if not isinstance(address, ipaddress.IPv6Interface):
        raise at.error(
            f"{value!r} is an IPv4 address; address6 takes an IPv6 one (like fd00::1/64), "
            "address the IPv4 one"
        )
    if "/" not in value:
        raise at.error(f"{value!r} has no prefix length (write ADDRESS/PREFIX, like {value}/64)")
    return address
