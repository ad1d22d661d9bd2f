"""The lab's wiring: names, guests, their NICs and MACs, cables, addresses, ports.

Every name carries the lab's id (``lab_id``: ``lab`` and 4 hex digits of
the lab directory's path), so two labs on one machine never share a host or
link name, and so never a lease in a shared reservation store.  Guests are
``ID-0``, ``ID-1``, ... and are cabled as a chain: ``ID-0 - ID-1 - ... -
ID-(N-1)``.  Cable ``c`` (link ``ID-c-(c+1)``) joins guest ``c`` and guest
``c+1``: each end's QEMU binds a UDP port of its own on 127.0.0.1 and sends
its frames to the other end's (connectionless, so either guest's QEMU can
be restarted alone and the cable works again, which a TCP socket netdev's
``connect`` side never does); it carries the subnet ``198.18.c.0/24``
(``.1`` on the lower guest, ``.2`` on the upper one) and the IPv6 subnet
``2001:2:0:c::/64`` (``::1`` and ``::2``; ``c`` in hex), and ends on each
guest in a data NIC whose QEMU netdev id and guest interface name are both
``dataK`` (K counts that guest's cables).
For two guests this is one cable, ``ID-0-1``: ID-0:data0 to ID-1:data0.

A *middlebox lab* (``hil lab up --middlebox``) has a third guest, ``ID-2``
(the middlebox M), on the cable between ``ID-0`` (A) and ``ID-1`` (B): two
cables, A:data0 to M:data0 and M:data1 to B:data0, and one link ``ID-0-1``
from A:data0 to B:data0 on the subnet ``198.18.0.0/24`` (A ``.1``, B ``.2``),
as in a two-guest lab.  M's two NICs have no address: M bridges them
(``guest_boot.sh``), so frames pass between A and B as over one cable.
The management NIC ``mgmt0`` is QEMU user networking (``restrict=on``: no way
out) with SSH forwarded from 127.0.0.1.
"""

from __future__ import annotations

import hashlib
import ipaddress
import re
import socket
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

from hil.errors import InputError, LabError

MAX_GUESTS = 32  # a chain of 31 cables: far more than two cores can run
MIDDLEBOX = 2  # the middlebox guest's index: A and B keep 0 and 1, as in a two-guest lab
MGMT_ADDRESS = "10.0.2.15/24"  # QEMU user networking's guest address
# The data links' prefixes: the benchmarking ranges, never routed (IPv4 198.18.0.0/15,
# RFC 2544 appendix C.2.2 and RFC 5735; IPv6 2001:2::/48, RFC 5180 section 8).
DATA_V4 = "198.18.{cable}.0/24"
DATA_V6 = "2001:2:0:{cable:x}::/64"
# 4 hex digits: names stay short in timelines and reports, and two labs on
# one machine share an id with a chance of 1 in 65536.
LAB_ID_DIGITS = 4
# A guest name, as ``control`` matches the files named after guests: the
# lab's id and the guest's index.  ``lab0`` (no id) is how hil named guests
# before names carried the lab id; ``up`` replaces such a lab.
GUEST_NAME = re.compile(rf"lab(?:[0-9a-f]{{{LAB_ID_DIGITS}}}-)?[0-9]+")


@dataclass(frozen=True)
class Nic:
    """A guest NIC: QEMU netdev id (also the guest's interface name) and MAC."""

    netdev: str
    mac: str
    # Interface address with prefix, "198.18.0.1/24"; None: a middlebox's bridge port,
    # which has no address and no siw device.
    address: str | None
    address6: str | None = None  # IPv6 interface address with prefix, "2001:2::1/64"


@dataclass(frozen=True)
class CableEnd:
    """One end of a cable: a guest index and that guest's data NIC."""

    guest: int
    nic: Nic
    port: int  # the UDP port this end's QEMU binds on 127.0.0.1


@dataclass(frozen=True)
class Cable:
    """A point-to-point cable: a QEMU UDP socket netdev at each end, sending to the other."""

    lab: str  # the lab's id, ``lab_id``
    index: int
    a: CableEnd
    b: CableEnd

    @property
    def name(self) -> str:
        """``ID-0-1``: the link name used in the inventory (and the pair's name)."""
        return f"{self.lab}-{self.a.guest}-{self.b.guest}"


@dataclass(frozen=True)
class Ports:
    """The ports of a lab on 127.0.0.1: SSH (TCP) per guest, two UDP ports per cable
    (``cables[2c]`` at cable ``c``'s end ``a``, ``cables[2c + 1]`` at ``b``)."""

    ssh: tuple[int, ...]
    cables: tuple[int, ...]


def lab_id(lab_dir: Path) -> str:
    """The lab's id, ``lab`` + 4 hex digits of the SHA-1 of its directory's real path.

    Derived, not stored, so nothing can go stale; the real path (symlinks
    and ``..`` resolved) makes every spelling of one directory give one id.
    """
    # A name, not a secret: usedforsecurity=False keeps FIPS-mode Pythons happy.
    digest = hashlib.sha1(str(lab_dir.resolve()).encode(), usedforsecurity=False).hexdigest()
    return "lab" + digest[:LAB_ID_DIGITS]


def guest_name(lab: str, index: int) -> str:
    """The name of guest ``index`` of lab ``lab``: inventory host name and guest hostname."""
    return f"{lab}-{index}"


def mgmt_nic(guest: int) -> Nic:
    """The management NIC of a guest."""
    return Nic("mgmt0", f"52:54:00:00:{guest:02x}:00", MGMT_ADDRESS)


def check_hosts(n: int) -> None:
    """InputError unless ``n`` guests make a lab."""
    if not 2 <= n <= MAX_GUESTS:
        raise InputError(f"--hosts must be between 2 and {MAX_GUESTS}, got {n}")


def cables(lab: str, n: int, cable_ports: tuple[int, ...], middlebox: bool = False) -> list[Cable]:
    """The cables of lab ``lab``'s ``n`` guests, on the given UDP ports (two per cable, see
    ``Ports``): a chain, or with ``middlebox`` A - M - B (three guests)."""
    check_hosts(n)
    if middlebox and n != MIDDLEBOX + 1:
        raise LabError(f"a middlebox lab has {MIDDLEBOX + 1} guests, not {n}")
    if len(cable_ports) != 2 * (n - 1):
        raise LabError(f"{n} guests need {2 * (n - 1)} cable ports, got {len(cable_ports)}")
    nic_count = [0] * n
    result = []
    for c, pair in enumerate(_wiring(n, middlebox)):
        ends = []
        for side, guest in enumerate(pair):
            k = nic_count[guest]
            nic_count[guest] += 1
            nic = _data_nic(guest, k, *_address(c, side, guest, middlebox))
            ends.append(CableEnd(guest, nic, cable_ports[2 * c + side]))
        result.append(Cable(lab, c, ends[0], ends[1]))
    return result


def _wiring(n: int, middlebox: bool) -> list[tuple[int, int]]:
    """Each cable's two guests, in cable order."""
    if middlebox:
        return [(0, MIDDLEBOX), (MIDDLEBOX, 1)]
    return [(c, c + 1) for c in range(n - 1)]


def _address(c: int, side: int, guest: int, middlebox: bool) -> tuple[int, int | None]:
    """The subnet (by index) and host number of cable ``c``'s end ``side`` on ``guest``;
    host None: no address (the middlebox's ports)."""
    if not middlebox:
        return c, side + 1
    # One link A - B through M: one subnet, A .1 and B .2 as in a two-guest lab.
    return 0, None if guest == MIDDLEBOX else guest + 1


def _data_nic(guest: int, k: int, subnet_index: int, host: int | None) -> Nic:
    """Data NIC ``dataK`` of ``guest``, with host number ``host`` of its subnet (or none)."""
    mac = f"52:54:00:01:{guest:02x}:{k:02x}"
    if host is None:
        return Nic(f"data{k}", mac, None)
    subnet = ipaddress.IPv4Network(DATA_V4.format(cable=subnet_index))
    subnet6 = ipaddress.IPv6Network(DATA_V6.format(cable=subnet_index))
    return Nic(
        f"data{k}",
        mac,
        f"{subnet[host]}/{subnet.prefixlen}",
        f"{subnet6[host]}/{subnet6.prefixlen}",
    )


@dataclass(frozen=True)
class Link:
    """A link of the lab's inventory: two guests' data NICs, joined by one cable, or (a
    middlebox lab) by two cables the middlebox bridges."""

    lab: str
    a: CableEnd
    b: CableEnd
    # The middlebox's ends: the one toward ``a``, the one toward ``b``.
    middlebox: tuple[CableEnd, CableEnd] | None = None

    @property
    def name(self) -> str:
        """``ID-0-1``: the link name used in the inventory (and the pair's name)."""
        return f"{self.lab}-{self.a.guest}-{self.b.guest}"


def links(lab_cables: list[Cable], middlebox: bool = False) -> list[Link]:
    """The inventory's links over ``lab_cables``: one a cable, or one through the middlebox."""
    if not middlebox:
        return [Link(c.lab, c.a, c.b) for c in lab_cables]
    to_a, to_b = lab_cables
    return [Link(to_a.lab, to_a.a, to_b.b, (to_a.b, to_b.a))]


def data_nics(guest: int, lab_cables: list[Cable]) -> list[tuple[Cable, Nic]]:
    """The data NICs of ``guest`` with their cables, in netdev-id order."""
    nics = []
    for cable in lab_cables:
        for end in (cable.a, cable.b):
            if end.guest == guest:
                nics.append((cable, end.nic))
    return sorted(nics, key=lambda cn: cn[1].netdev)


def cable_ports(guest: int, lab_cables: list[Cable]) -> list[int]:
    """The UDP ports ``guest``'s QEMU binds, one per cable end on it."""
    return [end.port for c in lab_cables for end in (c.a, c.b) if end.guest == guest]


def free_ports(
    count: int, avoid: Collection[int] = (), kind: socket.SocketKind = socket.SOCK_STREAM
) -> tuple[int, ...]:
    """``count`` distinct ports (TCP, or UDP for ``SOCK_DGRAM``) free on 127.0.0.1 now,
    none of them in ``avoid``.

    The kernel picks each (bind to port 0) while all are held, so they are
    distinct; QEMU binds them a moment later.  Another process may take one
    in between: the lab then retries with new ports, passing the old ones as
    ``avoid``.
    """
    held: list[socket.socket] = []
    ports: list[int] = []
    try:
        while len(ports) < count:
            s = socket.socket(socket.AF_INET, kind)
            held.append(s)
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
            if port not in avoid:
                ports.append(port)
            if len(held) > count + 100:
                raise LabError("cannot find free ports on 127.0.0.1")
    finally:
        for s in held:
            s.close()
    return tuple(ports)


def allocate_ports(n: int, avoid: Collection[int] = ()) -> Ports:
    """SSH and cable ports for an ``n``-guest lab."""
    check_hosts(n)
    ssh = free_ports(n, avoid)
    return Ports(ssh=ssh, cables=free_ports(2 * (n - 1), {*avoid, *ssh}, socket.SOCK_DGRAM))
