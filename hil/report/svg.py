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

    svg_text = render_timeline(timeline, verdict)
    svg_text = render_timeline(timeline, verdict, exchange, wire_verdict)
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from xml.sax.saxutils import escape

from hil.judge.contract import Verdict
from hil.judge.timeline import Action, Event, Timeline
from hil.report.wirelane import Crossing, WireLane, wire_lane
from hil.wire.judge import WireVerdict
from hil.wire.model import Exchange

WIDTH = 1100
GUTTER = 150  # left margin for the lane names
RIGHT = 30
FONT = 11
CHAR_W = 6.4  # average glyph width at FONT px, for label collision estimates
ROW_H = 15
MAX_ROWS = 5  # label rows per track; more labels only get tooltips
OK_COLOR = "#1565c0"
EVENT_COLOR = "#2e7d32"
BAD_COLOR = "#c62828"
PULL_FILL = "#fff3e0"
TONE_COLOR = {"tcp": "#455a64", "mpa": OK_COLOR, "bad": BAD_COLOR}
RETRANS_COLOR = "#ef6c00"
WIRE_ROWS = 4  # label rows in the wire lane


@dataclass(frozen=True)
class _Axis:
    """Maps controller microseconds to x pixels; ``origin_us`` is shown as 0 ms."""

    start_us: int
    end_us: int
    origin_us: int

    def x(self, t_us: int) -> float:
        span = max(self.end_us - self.start_us, 1)
        return GUTTER + (t_us - self.start_us) * (WIDTH - GUTTER - RIGHT) / span

    def px_per_us(self) -> float:
        return (WIDTH - GUTTER - RIGHT) / max(self.end_us - self.start_us, 1)


@dataclass(frozen=True)
class _Mark:
    """One thing to draw on a track: where, what label, which color."""

    t_us: int
    end_us: int
    label: str
    tooltip: str
    color: str
    ringed: bool = False


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
        actions = [_action_mark(a) for a in timeline.actions if a.side == side]
        events = [_event_mark(e, cited) for e in timeline.events if e.side == side]
        svg, height = _lane(axis, y, f"{host} ({side})", actions, events, uncertainty)
        parts.append(svg)
        y += height
        if side == "a" and lane is not None:
            svg, height = _wire_lane(axis, y, lane)
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


def _axis(tl: Timeline, lane: WireLane | None) -> _Axis:
    times = [e.t_us for e in tl.events] + [a.t_us for a in tl.actions]
    ends = [a.end_us for a in tl.actions] + times
    # Packets widen the axis (a FIN after the last event still shows); 0 ms stays the
    # first action or event.
    wire = [t for c in (lane.crossings if lane else ()) for t in (c.depart_us, c.arrive_us)]
    wire += [m.t_us for m in (lane.marks if lane else ())]
    if not times + wire:
        return _Axis(0, 1000, 0)
    start, end = min(times + wire), max(ends + wire)
    pad = max((end - start) // 40, 50)
    return _Axis(start - pad, end + pad, min(times or wire))


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


def _action_mark(a: Action) -> _Mark:
    params = ", ".join(f"{k}={v}" for k, v in sorted(a.params.items()))
    label = f"{a.name}{' ' + a.id if a.id else ''}" + ("" if a.ok else f" → {a.result}")
    return _Mark(
        a.t_us,
        a.end_us,
        label,
        a.brief() + (f" [{params}]" if params else ""),
        OK_COLOR if a.ok else BAD_COLOR,
    )


def _event_mark(e: Event, cited: set[tuple[str, int, str]]) -> _Mark:
    status = f"({e.status})" if e.status else ""
    ringed = (e.id, e.t_us, e.type) in cited
    return _Mark(
        e.t_us,
        e.t_us,
        f"{e.type}{status} {e.id}",
        e.brief(),
        BAD_COLOR if e.status or ringed else EVENT_COLOR,
        ringed,
    )


def _lane(
    axis: _Axis, top: int, name: str, actions: list[_Mark], events: list[_Mark], uncertainty_us: int
) -> tuple[str, int]:
    """One host's lane: its name, the action track and the event track; returns its height."""
    act_svg, act_rows = _track(axis, top + 8, actions, bars=True, uncertainty_us=0)
    ev_top = top + 8 + (act_rows + 1) * ROW_H + 6
    ev_svg, ev_rows = _track(axis, ev_top, events, bars=False, uncertainty_us=uncertainty_us)
    height = ev_top - top + (ev_rows + 1) * ROW_H + 12
    frame = (
        f'<g class="lane" data-host="{escape(name)}">'
        f'<rect x="4" y="{top}" width="{WIDTH - 8}" height="{height - 4}" fill="none" '
        f'stroke="#bbb"/>'
        f'<text x="10" y="{top + 16}" font-weight="bold" font-size="12">{escape(name)}</text>'
        f'<text x="10" y="{top + 31}" fill="#666">actions</text>'
        f'<text x="10" y="{ev_top + 16}" fill="#666">events</text>'
    )
    return frame + act_svg + ev_svg + "</g>", height


def _track(
    axis: _Axis, top: int, marks: list[_Mark], bars: bool, uncertainty_us: int
) -> tuple[str, int]:
    """Marks on a baseline at ``top`` with staggered labels; returns (svg, label rows used)."""
    out: list[str] = []
    row_end = [float("-inf")] * MAX_ROWS
    used = 0
    base = top + 4
    for m in sorted(marks, key=lambda m: m.t_us):
        x, x2 = axis.x(m.t_us), axis.x(m.end_us)
        title = f"<title>{escape(m.tooltip)}</title>"
        if bars:
            out.append(
                f'<rect x="{x:.1f}" y="{base - 3}" width="{max(x2 - x, 3):.1f}" '
                f'height="7" fill="{m.color}">{title}</rect>'
            )
        else:
            half = uncertainty_us * axis.px_per_us()
            if half >= 1:
                out.append(
                    f'<line x1="{x - half:.1f}" y1="{base}" x2="{x + half:.1f}" '
                    f'y2="{base}" stroke="{m.color}" stroke-opacity="0.4" '
                    f'stroke-width="5"/>'
                )
            ring = (
                (
                    f'<circle cx="{x:.1f}" cy="{base}" r="7" fill="none" stroke="{BAD_COLOR}" '
                    f'stroke-width="2"/>'
                )
                if m.ringed
                else ""
            )
            out.append(
                f'{ring}<circle cx="{x:.1f}" cy="{base}" r="4" fill="{m.color}">{title}</circle>'
            )
        spot = _stagger(row_end, x, m.label)
        if spot is None:
            continue  # no room: the tooltip still carries the text
        row, anchor = spot
        used = max(used, row + 1)
        ly = base + 14 + row * ROW_H
        out.append(f'<line x1="{x:.1f}" y1="{base + 4}" x2="{x:.1f}" y2="{ly - 9}" stroke="#ccc"/>')
        out.append(
            f'<text x="{x:.1f}" y="{ly}" fill="{m.color}" text-anchor="{anchor}">'
            f"{escape(m.label)}</text>"
        )
    return "".join(out), used


def _stagger(row_end: list[float], x: float, label: str) -> tuple[int, str] | None:
    """The first label row with room for ``label`` at ``x`` and its text anchor; None: full.

    ``row_end`` holds where each row's last label ends, and is updated.
    """
    width = len(label) * CHAR_W
    # Near the right edge the label ends at the mark instead of starting there.
    anchor = "end" if x + width > WIDTH - 6 else "start"
    left = x if anchor == "start" else x - width
    row = next((r for r in range(len(row_end)) if row_end[r] < left - 2), None)
    if row is not None:
        row_end[row] = max(x, left + width)
    return None if row is None else (row, anchor)


def _wire_lane(axis: _Axis, top: int, lane: WireLane) -> tuple[str, int]:
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
        spot = _stagger(row_end, x, c.label)
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


def _arrow(axis: _Axis, c: Crossing, y1: int, y2: int) -> str:
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


def _pulls(axis: _Axis, actions: Iterable[Action], top: int, bottom: int) -> str:
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


def _ticks(axis: _Axis, top: int, bottom: int) -> str:
    """Vertical grid lines labelled in ms since the first action or event."""
    lo, hi = axis.start_us - axis.origin_us, axis.end_us - axis.origin_us
    step_us = round(_nice_step((hi - lo) / 1000 / 8) * 1000)
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


def _nice_step(raw_ms: float) -> float:
    """1, 2 or 5 times a power of ten, at least ``raw_ms``."""
    power = 0.001
    while True:
        for m in (1, 2, 5):
            if m * power >= raw_ms:
                return m * power
        power *= 10


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
