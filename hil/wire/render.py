"""An exchange as text: what the report attaches and ``hil wire judge`` prints.

Per connection, active side first: who saw it, its MPA request and reply
in full, then each capture point's packets in capture order, one
:meth:`~hil.wire.model.Packet.brief` line each, and a TERMINATE's words.

:func:`ladder_text` draws the packets that matter to the CM (SYN, SYN-ACK,
MPA request and reply, FIN, RST, TERMINATE, and retransmissions) as arrows
between the active side (left) and the passive side (right), with the time
each capture point saw them; the timeline picture's wire lane
(:mod:`hil.report.wirelane`) draws the same packets, chosen by
:func:`what_matters` from the :func:`segments` of a connection.
"""

from __future__ import annotations

from collections import Counter
from typing import Literal

from hil.wire.model import Connection, Exchange, Mpa, Packet, endpoint_text

Tone = Literal["tcp", "mpa", "bad"]  # how a packet that matters is coloured: bad ones red
ARROW_WIDTH = 36


def exchange_text(exchange: Exchange) -> str:
    """The whole exchange, one block per connection."""
    head = [f"capture points: {', '.join(exchange.points) or 'none'}"]
    head += [f"note: {n}" for n in exchange.notes]
    if not exchange.connections:
        head.append("no TCP connections")
    blocks = ["\n".join(head), *(connection_text(c) for c in exchange.connections)]
    return "\n\n".join(blocks) + "\n"


def connection_text(conn: Connection) -> str:
    """One connection: its MPA frames, then its packets per capture point."""
    lines = [f"connection {conn.name} (seen by {', '.join(conn.points)})"]
    for kind in ("request", "reply"):
        frame = conn.mpa(kind)
        if frame is not None and frame.mpa is not None:
            lines.append(f"  MPA {kind} #{frame.frame}: {mpa_text(frame.mpa)}")
    for point in conn.points:
        lines.append(f"  at {point}:")
        lines += [f"    {line}" for p in conn.seen_by(point) for line in packet_lines(p)]
    return "\n".join(lines)


def mpa_text(m: Mpa) -> str:
    """``rev 2 marker 0 crc 1 reject 0 enhanced 1 IRD 1 ORD 1 private data (3 bytes) 616263``."""
    bits = f"marker {m.marker:d} crc {m.crc:d} reject {m.reject:d} enhanced {m.enhanced:d}"
    words = f"rev {m.revision} {bits}"
    if m.ird is not None:
        words += f" IRD {m.ird} ORD {m.ord}"
    pdata = f"private data ({len(m.private_data) // 2} bytes) {m.private_data or '-'}"
    wire = "" if m.wire_private_data == m.private_data else f" [wire {m.wire_private_data}]"
    return f"{words} {pdata}{wire}"


def packet_lines(p: Packet) -> list[str]:
    """The packet's brief line, and its TERMINATE's words when it carries one."""
    lines = [p.brief()]
    if p.terminate is not None and p.terminate.text:
        lines.append(f"  TERMINATE: {p.terminate.text}")
    return lines


def what_matters(p: Packet) -> tuple[str, Tone] | None:
    """The packet's ladder label and tone when it matters to the CM, else None.

    ``("SYN", "tcp")``, ``("MPA reply", "mpa")``, ``("TERMINATE DDP+RST", "bad")``:
    a TERMINATE, an RST and an MPA reject are ``bad``.
    """
    parts: list[str] = []
    tone: Tone = "tcp"
    if p.terminate is not None:
        parts.append(f"TERMINATE {p.terminate.layer}")
        tone = "bad"
    if p.mpa is not None:
        parts.append("MPA reject" if p.mpa.reject else f"MPA {p.mpa.kind}")
        tone = "bad" if p.mpa.reject or tone == "bad" else "mpa"
    if "SYN" in p.flags:
        parts.append("SYN-ACK" if "ACK" in p.flags else "SYN")
    if "FIN" in p.flags:
        parts.append("FIN")
    if "RST" in p.flags:
        parts.append("RST")
        tone = "bad"
    return ("+".join(parts), tone) if parts else None


def plain_label(p: Packet) -> str:
    """What a segment that does not matter carried: its RDMAP opcodes, ``data`` or ``ACK``."""
    if p.rdmap:
        return "/".join(p.rdmap)
    return "data" if p.length else "ACK"


def segments(conn: Connection) -> list[tuple[Packet, ...]]:
    """The connection's segments in order of first sight, each with its view from every point.

    Two points' packets are the same segment when their addresses, sequence
    number, flags and length agree; the n-th such packet of one point is the
    n-th of the other (a retransmission repeats them).
    """
    groups: dict[tuple[object, ...], list[Packet]] = {}
    seen: Counter[tuple[object, ...]] = Counter()
    for p in conn.packets:
        base = (p.src, p.dst, p.seq, p.flags, p.length)
        n = seen[(*base, p.point)]
        seen[(*base, p.point)] += 1
        groups.setdefault((*base, n), []).append(p)
    return [tuple(views) for views in groups.values()]


def ladder_text(exchange: Exchange) -> str:
    """The packets that matter of every connection as a ladder, one block per connection."""
    blocks = [connection_ladder(c, exchange) for c in exchange.connections]
    return "\n\n".join(blocks or ["no TCP connections"]) + "\n"


def connection_ladder(conn: Connection, exchange: Exchange) -> str:
    """One connection's ladder: a row per segment that matters or was retransmitted.

    A row gives the time each capture point saw the segment: ms on the
    timeline when the point was placed on it, else ms since that point's
    first packet of the exchange (its wall clock).
    """
    points = conn.points
    placed = {pt: pt in exchange.uncertainty_us for pt in points}
    first = {
        pt: min(p.wall_us for c in exchange.connections for p in c.packets if p.point == pt)
        for pt in points
    }
    clocks = ", ".join(
        f"{pt}: {'ms on the timeline' if placed[pt] else 'ms since its first packet'}"
        for pt in points
    )
    head = [f"connection {conn.name} ({clocks})"]
    left, right = endpoint_text(conn.active), endpoint_text(conn.passive)
    cols = "".join(f"{pt[:11]:>12}" for pt in points)
    head.append(f"{cols}  {left:<{ARROW_WIDTH // 2}}{right:>{ARROW_WIDTH - ARROW_WIDTH // 2}}")
    rows, other = [], Counter[str]()
    for views in _in_order(segments(conn)):
        what = what_matters(views[0])
        retrans = any(p.retransmission for p in views)
        if what is None and not retrans:
            other[plain_label(views[0])] += 1
            continue
        label = what[0] if what is not None else plain_label(views[0])
        label += " (retransmission)" if retrans else ""
        at = {p.point: p for p in views}
        times = "".join(
            f"{_ms(at[pt], placed[pt], first[pt]):>12}" if pt in at else f"{'-':>12}"
            for pt in points
        )
        rows.append(f"{times}  {_arrow(label, conn.role(views[0]) == 'active')}")
    if other:
        rows.append("  also: " + ", ".join(f"{n} {k}" for k, n in other.most_common()))
    return "\n".join(head + rows)


def _in_order(segs: list[tuple[Packet, ...]]) -> list[tuple[Packet, ...]]:
    """By timeline time when every segment has a placed view, else in order of first sight."""
    first: list[int] = []
    for views in segs:
        times = [p.t_us for p in views if p.t_us is not None]
        if not times:
            return segs
        first.append(min(times))
    return [v for _, v in sorted(zip(first, segs, strict=True), key=lambda tv: tv[0])]


def _ms(p: Packet, placed: bool, first_us: int) -> str:
    if placed and p.t_us is not None:
        return f"{p.t_us / 1000:.3f}"
    return f"{(p.wall_us - first_us) / 1000:.3f}"


def _arrow(label: str, rightward: bool) -> str:
    """``|------ SYN ----->|`` (active to passive) or ``|<----- SYN-ACK ------|``."""
    body = f" {label} "
    dashes = max(ARROW_WIDTH - 3 - len(body), 2)
    left, right = dashes // 2, dashes - dashes // 2
    if rightward:
        return f"|{'-' * left}{body}{'-' * right}>|"
    return f"|<{'-' * left}{body}{'-' * right}|"
