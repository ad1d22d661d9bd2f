"""The wire lane of the timeline picture, drawn: an arrow per crossing between the
two hosts' lanes, retransmissions as marks (what is drawn and why:
:mod:`hil.report.wirelane`)."""

from __future__ import annotations

from xml.sax.saxutils import escape

from hil.report.svgdraw import (
    BAD_COLOR,
    GUTTER,
    RETRANS_COLOR,
    ROW_H,
    TONE_COLOR,
    WIDTH,
    WIRE_ROWS,
    Axis,
    stagger,
)
from hil.report.wirelane import Crossing, WireLane


def draw_wire_lane(axis: Axis, top: int, lane: WireLane) -> tuple[str, int]:
    """The wire lane: an arrow per crossing between its edges; returns its height."""
    height = 24 + (WIRE_ROWS + 1) * ROW_H
    edge = {"a": top + 4, "b": top + height - 8}
    out = [
        f'<g class="wire" data-crossings="{len(lane.crossings)}">'
        f'<rect x="4" y="{top}" width="{WIDTH - 8}" height="{height - 4}" fill="#fafafa" '
        f'stroke="#bbb"><title>{escape(lane.summary)}</title></rect>'
        f'<text x="10" y="{top + 16}" font-weight="bold" font-size="12">wire</text>'
        f'<text x="10" y="{top + 31}" fill="#666">↓ a→b  ↑ b→a</text>'
    ]
    if not lane.crossings and not lane.marks:
        out.append(
            f'<text x="{GUTTER}" y="{top + height // 2}" fill="#666">'
            f"no packet of this timeline placed on it (see below)</text>"
        )
    row_end = [float("-inf")] * WIRE_ROWS
    for c in lane.crossings:
        out.append(_arrow(axis, c, edge[c.sender], edge["b" if c.sender == "a" else "a"]))
        x = min(axis.x(c.depart_us), axis.x(c.arrive_us)) + 4
        spot = stagger(row_end, x, c.label)
        if spot is not None:
            row, anchor = spot
            out.append(
                f'<text x="{x:.1f}" y="{top + 26 + row * ROW_H}" fill="{TONE_COLOR[c.tone]}" '
                f'text-anchor="{anchor}">{escape(c.label)}</text>'
            )
    for m in lane.marks:
        x, y = axis.x(m.t_us), edge[m.sender] + (6 if m.sender == "a" else -6)
        out.append(
            f'<path class="retransmission" d="M{x - 3:.1f},{y - 3} l6,6 m0,-6 l-6,6" '
            f'stroke="{RETRANS_COLOR}" stroke-width="1.5"><title>{escape(m.tooltip)}</title></path>'
        )
    return "".join(out) + "</g>", height


def _arrow(axis: Axis, c: Crossing, y1: int, y2: int) -> str:
    """One crossing: a line from the sender's edge to the receiver's and its head."""
    x1, x2 = axis.x(c.depart_us), axis.x(c.arrive_us)
    color = TONE_COLOR[c.tone]
    dash = ' stroke-dasharray="4 3"' if c.retransmission else ""
    halo = (
        f'<line x1="{x1:.1f}" y1="{y1}" x2="{x2:.1f}" y2="{y2}" stroke="{BAD_COLOR}" '
        f'stroke-opacity="0.3" stroke-width="7"/>'
        if c.cited
        else ""
    )
    down = 1 if y2 > y1 else -1
    head = f"{x2 - 3.5:.1f},{y2 - 7 * down} {x2 + 3.5:.1f},{y2 - 7 * down} {x2:.1f},{y2}"
    return (
        f'<g class="crossing" data-label="{escape(c.label)}">{halo}'
        f'<line x1="{x1:.1f}" y1="{y1}" x2="{x2:.1f}" y2="{y2 - 6 * down}" stroke="{color}" '
        f'stroke-width="1.5"{dash}/><polygon points="{head}" fill="{color}"/>'
        f"<title>{escape(c.label)}\n{escape(c.tooltip)}</title></g>"
    )
