"""A CM timeline as an SVG picture: a lane per host, actions and events on one time axis.

Each lane (one per host of the pair) has a row of controller actions (a bar
as long as the call took, red when it failed) above a row of the events the
host's channel delivered (a dot, red when the status is not 0, ringed when a
contract violation cites it).  Labels are staggered so that they do not
overlap; what does not fit keeps its text in a hover tooltip.  A link pull
shades the time until its restore on every lane.  The footer states each
host's clock offset and its uncertainty, drawn as a bar around each event,
because cross-host order is only good to the sum of both uncertainties.

Given the test's decoded capture (``exchange``), a wire lane between the two
hosts' lanes draws the packets that matter as a ladder: arrows from the
sender's lane to the receiver's (SYN, SYN-ACK, MPA request and reply, FIN;
RST, TERMINATE and an MPA reject in red, ringed when a failed wire rule
cites them; dashed when retransmitted; other retransmissions as marks).
What is drawn and why is :mod:`hil.report.wirelane`; the footer states each
capture point's placement uncertainty and what was left out.

Here the picture is put together (the axis, the header, the ticks, the pull
shading, the footer); a host's lane is drawn in :mod:`hil.report.svglanes`, the
wire lane in :mod:`hil.report.svgwire`, with what they share in
:mod:`hil.report.svgdraw`.

    svg_text = render_timeline(timeline, verdict)
    svg_text = render_timeline(timeline, verdict, exchange, wire_verdict)
"""

from __future__ import annotations

from collections.abc import Iterable
from xml.sax.saxutils import escape

from hil.judge.contract import Verdict
from hil.judge.timeline import Action, Timeline
from hil.report.svgdraw import (
    BAD_COLOR,
    EVENT_COLOR,
    FONT,
    PULL_FILL,
    ROW_H,
    WIDTH,
    Axis,
    nice_step,
)
from hil.report.svglanes import action_mark, event_mark, host_lane
from hil.report.svgwire import draw_wire_lane
from hil.report.wirelane import WireLane, wire_lane
from hil.wire.judge import WireVerdict
from hil.wire.model import Exchange


def render_timeline(
    timeline: Timeline,
    verdict: Verdict | None = None,
    exchange: Exchange | None = None,
    wire: WireVerdict | None = None,
) -> str:
    """The timeline as a standalone SVG document (text); with ``exchange``, a wire lane."""
    lane = wire_lane(timeline, exchange, _cited_packets(wire)) if exchange is not None else None
    axis = _axis(timeline, lane)
    cited = _cited(verdict)
    parts: list[str] = []
    y = 48
    lanes_top = y
    for side, host in zip(("a", "b"), timeline.pair, strict=True):
        uncertainty = timeline.uncertainty_us(host)
        actions = [action_mark(a) for a in timeline.actions if a.side == side]
        events = [event_mark(e, cited) for e in timeline.events if e.side == side]
        svg, height = host_lane(axis, y, f"{host} ({side})", actions, events, uncertainty)
        parts.append(svg)
        y += height
        if side == "a" and lane is not None:
            svg, height = draw_wire_lane(axis, y, lane)
            parts.append(svg)
            y += height
    shading = _pulls(axis, timeline.actions, lanes_top, y)
    ticks = _ticks(axis, lanes_top, y)
    lines = _footer_lines(timeline) + list(lane.notes if lane is not None else ())
    footer = _footer(lines, y + 36)
    height = y + 36 + ROW_H * (len(lines) + 1)
    head = _header(timeline, verdict, wire)
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
        f'viewBox="0 0 {WIDTH} {height}" font-family="DejaVu Sans, Arial, sans-serif" '
        f'font-size="{FONT}">'
        f'<rect width="{WIDTH}" height="{height}" fill="white"/>'
        f"{head}{shading}{ticks}{''.join(parts)}{footer}</svg>"
    )


def _axis(tl: Timeline, lane: WireLane | None) -> Axis:
    times = [e.t_us for e in tl.events] + [a.t_us for a in tl.actions]
    ends = [a.end_us for a in tl.actions] + times
    # Packets widen the axis (a FIN after the last event still shows); 0 ms stays the
    # first action or event.
    wire = [t for c in (lane.crossings if lane else ()) for t in (c.depart_us, c.arrive_us)]
    wire += [m.t_us for m in (lane.marks if lane else ())]
    if not times + wire:
        return Axis(0, 1000, 0)
    start, end = min(times + wire), max(ends + wire)
    pad = max((end - start) // 40, 50)
    return Axis(start - pad, end + pad, min(times or wire))


def _cited(verdict: Verdict | None) -> set[tuple[str, int, str]]:
    """The events a violation cites, as (id, t_us, type) keys."""
    if verdict is None:
        return set()
    return {(e.id, e.t_us, e.type) for v in verdict.violations for e in v.events}


def _cited_packets(wire: WireVerdict | None) -> frozenset[str]:
    """The packets (``Packet.brief()``) a failed wire rule gives as evidence."""
    if wire is None:
        return frozenset()
    return frozenset(p for r in wire.failed for f in r.outcome.findings for p in f.packets)


def _pulls(axis: Axis, actions: Iterable[Action], top: int, bottom: int) -> str:
    """Shade each link pull until its restore (or the end of the picture)."""
    out = []
    pulls = sorted((a for a in actions if a.name in ("pull", "restore")), key=lambda a: a.t_us)
    start: Action | None = None
    for a in [*pulls, None]:
        if a is not None and a.name == "pull":
            start = start or a
            continue
        if start is not None:
            end = axis.x(a.t_us) if a is not None else axis.x(axis.end_us)
            x = axis.x(start.t_us)
            mode = start.params.get("mode", "")
            out.append(
                f'<rect x="{x:.1f}" y="{top}" width="{max(end - x, 2):.1f}" '
                f'height="{bottom - top}" fill="{PULL_FILL}"/>'
                f'<text x="{x + 3:.1f}" y="{top - 4}" fill="#e65100">'
                f"link pulled{' (' + escape(str(mode)) + ')' if mode else ''}</text>"
            )
            start = None
    return "".join(out)


def _ticks(axis: Axis, top: int, bottom: int) -> str:
    """Vertical grid lines labelled in ms since the first action or event."""
    lo, hi = axis.start_us - axis.origin_us, axis.end_us - axis.origin_us
    step_us = round(nice_step((hi - lo) / 1000 / 8) * 1000)
    out = []
    t = (lo // step_us) * step_us
    while t <= hi:
        if t >= lo:
            x = axis.x(axis.origin_us + t)
            out.append(
                f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{bottom + 4}" '
                f'stroke="#eee"/><text x="{x:.1f}" y="{bottom + 16}" '
                f'text-anchor="middle" fill="#555">{t / 1000:g} ms</text>'
            )
        t += step_us
    return "".join(out)


def _header(tl: Timeline, verdict: Verdict | None, wire: WireVerdict | None) -> str:
    status = ""
    if verdict is not None:
        color = EVENT_COLOR if verdict.ok else BAD_COLOR
        word = "PASSED" if verdict.ok else f"FAILED ({len(verdict.violations)} violations)"
        status = f' · <tspan fill="{color}" font-weight="bold">contract {word}</tspan>'
    if wire is not None:
        color = EVENT_COLOR if wire.ok else BAD_COLOR
        word = "PASSED" if wire.ok else f"FAILED ({len(wire.failed)} rules)"
        status += f' · <tspan fill="{color}" font-weight="bold">wire {word}</tspan>'
    title = (
        f"scenario {escape(tl.scenario)} · provider {escape(tl.provider)} · "
        f"pair {escape(tl.pair[0])} ↔ {escape(tl.pair[1])}"
    )
    return f'<text x="10" y="22" font-size="14" font-weight="bold">{title}{status}</text>'


def _footer_lines(tl: Timeline) -> list[str]:
    lines = [
        "times: ms since the first action or event, on the controller's clock; each host's "
        "stamps shifted by its estimated offset"
    ]
    for o in tl.offsets:
        lines.append(
            f"{o.host}: offset {o.offset_us / 1000:+.3f} ms "
            f"± {o.uncertainty_us / 1000:.3f} ms (shaded bar around its events)"
        )
    if len(tl.offsets) >= 2:
        total = tl.uncertainty_us(*tl.pair) / 1000
        lines.append(f"order across hosts is only certain beyond ± {total:.3f} ms")
    return lines


def _footer(lines: list[str], top: int) -> str:
    return "".join(
        f'<text x="10" y="{top + i * ROW_H}" fill="#444">{escape(line)}</text>'
        for i, line in enumerate(lines)
    )
