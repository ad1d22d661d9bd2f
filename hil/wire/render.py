"""An exchange as text: what the report attaches and ``hil wire judge`` prints.

Per connection, active side first: who saw it, its MPA request and reply
in full, then each capture point's packets in capture order, one
:meth:`~hil.wire.model.Packet.brief` line each, and a TERMINATE's words.
"""

from __future__ import annotations

from hil.wire.model import Connection, Exchange, Mpa, Packet


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
