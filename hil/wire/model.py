"""What a capture shows, as data: packets, and the TCP connections they belong to.

Decoding (:mod:`hil.wire.decode`, which runs tshark) produces these; the
wire rules (:mod:`hil.wire.rules`) and the report read them.  Nothing here
parses bytes: every field is what Wireshark's ``tcp``, ``iwarp_mpa`` and
``iwarp_ddp_rdmap`` dissectors said.

Times: ``wall_us`` is the packet's capture timestamp, on the CLOCK_REALTIME
of the host that captured it (``point``); ``t_us``, when the capture's clock
samples allowed it (:mod:`hil.wire.clock`), is the same instant on the
timeline's time base (the controller's CLOCK_MONOTONIC), good to
``Exchange.uncertainty_us[point]``.

Private data is lowercase hex, like the timeline's.
"""

from __future__ import annotations

import ipaddress
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal

# (address, port); the address as tshark prints it.
Endpoint = tuple[str, int]
MpaKind = Literal["request", "reply"]
Role = Literal["active", "passive"]
# TCP flags a rule cares about, as tshark names them in tcp.flags.str order.
FLAGS = ("SYN", "ACK", "FIN", "RST", "PSH")


def endpoint_text(ep: Endpoint) -> str:
    """``198.18.0.1:7174`` (IPv6 in brackets)."""
    host, port = ep
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def canonical(ep: Endpoint) -> Endpoint:
    """``ep`` with its address as tshark prints it, so that two spellings compare equal:
    IPv6 compressed and lowercase, without a scope (``%data0`` names an interface, it is
    never on the wire), an IPv4-mapped IPv6 address (``::ffff:198.18.0.1``) as the IPv4 one;
    a host that is no address is kept as it is."""
    host, port = ep
    try:
        ip = ipaddress.ip_address(host.partition("%")[0])
    except ValueError:
        return ep
    mapped = ip.ipv4_mapped if isinstance(ip, ipaddress.IPv6Address) else None
    return str(mapped or ip), port


@dataclass(frozen=True)
class Mpa:
    """An MPA request or reply frame (RFC 5044; MPA v2's enhanced setup, RFC 6581).

    ``private_data`` is the ULP's private data: when ``enhanced`` is set the
    first four bytes on the wire are the IRD/ORD words (``ird``, ``ord``) and
    are not part of it; ``wire_private_data`` is everything after the header.
    """

    kind: MpaKind
    revision: int
    marker: bool
    crc: bool
    reject: bool
    enhanced: bool
    private_data: str
    wire_private_data: str
    ird: int | None = None
    ord: int | None = None


@dataclass(frozen=True)
class Terminate:
    """An RDMAP TERMINATE message: the layer that failed, its error type and code.

    ``layer`` is ``"RDMAP"``, ``"DDP"`` or ``"LLP"`` (RFC 5040, 7.2);
    ``error_type`` and ``error_code`` are the numbers, ``text`` what tshark
    calls them.
    """

    layer: str
    error_type: int
    error_code: int
    text: str = ""


@dataclass(frozen=True)
class Packet:
    """One TCP segment of an iWARP connection, as one capture point saw it."""

    frame: int
    point: str  # the capture point (a host name) whose file it came from
    wall_us: int
    src: Endpoint
    dst: Endpoint
    flags: frozenset[str]
    seq: int = 0
    length: int = 0  # TCP payload bytes
    mss: int | None = None  # the MSS option's value (a SYN's), when it carries one
    retransmission: bool = False
    mpa: Mpa | None = None
    # RDMAP opcodes of the FPDUs in this segment, by tshark's names
    # ("Write", "Read Request", "Read Response", "Send", "Terminate", ...).
    rdmap: tuple[str, ...] = ()
    terminate: Terminate | None = None
    t_us: int | None = None  # on the timeline's time base, when known

    def brief(self) -> str:
        """``#12 198.18.0.1:44668 > 198.18.0.2:7174 FIN,ACK`` and what it carried."""
        what = [",".join(f for f in FLAGS if f in self.flags)]
        if self.mpa is not None:
            what.append(f"MPA {self.mpa.kind}{' REJECT' if self.mpa.reject else ''}")
        if self.terminate is not None:
            t = self.terminate
            what.append(f"TERMINATE {t.layer} type {t.error_type} code {t.error_code:#x}")
        elif self.rdmap:
            what.append("/".join(self.rdmap))
        if self.retransmission:
            what.append("retransmission")
        when = f" @{self.t_us / 1000:.3f}ms" if self.t_us is not None else ""
        return (
            f"#{self.frame}@{self.point} {endpoint_text(self.src)} > "
            f"{endpoint_text(self.dst)} {' '.join(w for w in what if w)}{when}"
        )


@dataclass(frozen=True)
class Connection:
    """One TCP connection: who opened it, and its packets from every capture point.

    ``active`` sent the first SYN (or, when the capture began after it, the
    MPA request); packets are in capture order per point.
    """

    active: Endpoint
    passive: Endpoint
    packets: tuple[Packet, ...]

    @property
    def name(self) -> str:
        """``198.18.0.1:44668 > 198.18.0.2:7174``: the 4-tuple, active side first."""
        return f"{endpoint_text(self.active)} > {endpoint_text(self.passive)}"

    @property
    def points(self) -> tuple[str, ...]:
        """The capture points that saw this connection, in the order of their first packet."""
        return tuple(dict.fromkeys(p.point for p in self.packets))

    def seen_by(self, point: str | None = None) -> tuple[Packet, ...]:
        """The packets one capture point saw (the first point when None): each packet once."""
        points = self.points
        if not points:
            return ()
        chosen = points[0] if point is None else point
        return tuple(p for p in self.packets if p.point == chosen)

    def role(self, packet: Packet) -> Role:
        """Which side sent ``packet``."""
        return "active" if packet.src == self.active else "passive"

    def sent_by(self, role: Role, point: str | None = None) -> tuple[Packet, ...]:
        """What ``role`` sent, as one capture point saw it."""
        return tuple(p for p in self.seen_by(point) if self.role(p) == role)

    def mpa(self, kind: MpaKind, point: str | None = None) -> Packet | None:
        """The first MPA request or reply of the connection."""
        return next(
            (p for p in self.seen_by(point) if p.mpa is not None and p.mpa.kind == kind), None
        )

    def with_flag(self, flag: str, point: str | None = None) -> tuple[Packet, ...]:
        """The packets carrying TCP flag ``flag`` (``"FIN"``, ``"RST"``, ...)."""
        return tuple(p for p in self.seen_by(point) if flag in p.flags)

    def terminates(self, point: str | None = None) -> tuple[Packet, ...]:
        """The packets carrying an RDMAP TERMINATE."""
        return tuple(p for p in self.seen_by(point) if p.terminate is not None)

    def retransmissions(self, point: str | None = None) -> tuple[Packet, ...]:
        """The segments tshark marked as retransmissions."""
        return tuple(p for p in self.seen_by(point) if p.retransmission)


@dataclass(frozen=True)
class Exchange:
    """Everything one test's capture decoded to: its connections, per capture point.

    ``points`` are the capture points that delivered a file;
    ``uncertainty_us`` says, per point, how well its packets' ``t_us`` sit
    on the timeline (absent: not placed); ``notes`` say what was missing
    (a point that failed, a capture that was cut at its size bound).
    """

    connections: tuple[Connection, ...]
    points: tuple[str, ...] = ()
    uncertainty_us: dict[str, int] = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """A JSON-safe dict (endpoints as lists, flags sorted)."""
        data: dict[str, Any] = _jsonable(asdict(self))
        return data

    def began(self, conn: Connection) -> tuple[int, int] | None:
        """When ``conn``'s first placed packet was seen, on the timeline's time base, and how
        far that may be off (µs); None when no packet of it is placed."""
        starts = [
            (p.t_us, self.uncertainty_us[p.point])
            for p in conn.packets
            if p.t_us is not None and p.point in self.uncertainty_us
        ]
        return min(starts, default=None)

    def between(self, a: str, b: str) -> tuple[Connection, ...]:
        """The connections between addresses ``a`` and ``b`` (either direction)."""
        return tuple(c for c in self.connections if {c.active[0], c.passive[0]} == {a, b})

    def placed(self, shift: dict[str, int], uncertainty_us: dict[str, int]) -> Exchange:
        """This exchange with each packet's ``t_us = wall_us + shift[point]`` set."""
        conns = tuple(
            replace(
                c,
                packets=tuple(
                    replace(p, t_us=p.wall_us + shift[p.point]) if p.point in shift else p
                    for p in c.packets
                ),
            )
            for c in self.connections
        )
        return replace(self, connections=conns, uncertainty_us=dict(uncertainty_us))


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, frozenset):
        return sorted(value)
    return value
