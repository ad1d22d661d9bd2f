"""A host's lane of the timeline picture: a track of the controller's actions (bars)
above a track of the events its channel delivered (dots, ringed when cited)."""

from __future__ import annotations

from dataclasses import dataclass
from xml.sax.saxutils import escape

from hil.judge.timeline import Action, Event
from hil.report.svgdraw import (
    BAD_COLOR,
    EVENT_COLOR,
    MAX_ROWS,
    OK_COLOR,
    ROW_H,
    WIDTH,
    Axis,
    stagger,
)


@dataclass(frozen=True)
class Mark:
    """One thing to draw on a track: where, what label, which color."""

    t_us: int
    end_us: int
    label: str
    tooltip: str
    color: str
    ringed: bool = False


def action_mark(a: Action) -> Mark:
    """An action as a bar: its call's span, red when it failed."""
    params = ", ".join(f"{k}={v}" for k, v in sorted(a.params.items()))
    label = f"{a.name}{' ' + a.id if a.id else ''}" + ("" if a.ok else f" → {a.result}")
    return Mark(
        a.t_us,
        a.end_us,
        label,
        a.brief() + (f" [{params}]" if params else ""),
        OK_COLOR if a.ok else BAD_COLOR,
    )


def event_mark(e: Event, cited: set[tuple[str, int, str]]) -> Mark:
    """An event as a dot: red when its status is not 0 or ``cited`` has it, then ringed too."""
    status = f"({e.status})" if e.status else ""
    ringed = (e.id, e.t_us, e.type) in cited
    return Mark(
        e.t_us,
        e.t_us,
        f"{e.type}{status} {e.id}",
        e.brief(),
        BAD_COLOR if e.status or ringed else EVENT_COLOR,
        ringed,
    )


def host_lane(
    axis: Axis, top: int, name: str, actions: list[Mark], events: list[Mark], uncertainty_us: int
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
    axis: Axis, top: int, marks: list[Mark], bars: bool, uncertainty_us: int
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
        spot = stagger(row_end, x, m.label)
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
