"""Each metric's trend over the kept nights as an SVG chart, on a static page of the report.

``write_page(report, nights, flags, thresholds)`` writes ``report/metrics/``:
``index.html`` (every chart inline, the flagged series first, then by metric
name; plain HTML that opens from ``file://`` and needs nothing of Allure, so
it works whatever the Allure version) and one ``<series>.svg`` per series.
A chart shows one series over the runs: the mean (solid line, a dot per
run, its values in the dot's tooltip), the p99 (dashed), the min..max band,
the ``above``/``below`` bounds of the thresholds that apply (dashed red), and
the newest point ringed red when it is flagged.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from xml.sax.saxutils import escape

from hil.inventory.thresholds import Threshold
from hil.report.metrics_flags import Flag
from hil.report.metrics_history import Night, SeriesStats, display_unit, number

# The timeline picture's palette, axis steps and font, so that both look alike.
from hil.report.svgdraw import BAD_COLOR, FONT, OK_COLOR, nice_step

PAGE_DIR = "metrics"
W, H = 560, 200
LEFT, RIGHT, TOP, BOTTOM = 64, 16, 30, 34
BAND_FILL = "#e3f2fd"


def _slug(series: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", series).strip("_")


def _y_ticks(lo: float, hi: float) -> list[float]:
    step = nice_step((hi - lo) / 5)
    first = (lo // step) * step
    return [first + i * step for i in range(int((hi - first) / step) + 2) if first + i * step <= hi]


def chart(
    series: str,
    points: Sequence[tuple[int, SeriesStats]],
    bounds: Iterable[float] = (),
    flagged: bool = False,
) -> str:
    """The SVG of one series over the runs in ``points`` (oldest first)."""
    if not points:
        raise ValueError(f"no points for {series}")
    bounds = list(bounds)
    unit = points[-1][1].unit
    values = [v for _, s in points for v in (s.min, s.max, s.p99)] + bounds
    scale, shown_unit = display_unit(max(abs(v) for v in values) or 1.0, unit)
    lo, hi = min(0.0, min(values)) / scale, max(values) / scale
    hi = hi if hi > lo else lo + 1.0
    hi *= 1.08  # headroom for the dots
    plot_w, plot_h = W - LEFT - RIGHT, H - TOP - BOTTOM

    def x(i: int) -> float:
        return LEFT + (plot_w * i / (len(points) - 1) if len(points) > 1 else plot_w / 2)

    def y(value: float) -> float:
        return TOP + plot_h * (1 - (value / scale - lo) / (hi - lo))

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" '
        f'font-family="sans-serif" font-size="{FONT}">',
        f'<text x="8" y="18" font-size="13" font-weight="bold">{escape(series)}'
        f"{' · FLAGGED' if flagged else ''}</text>",
    ]
    for t in _y_ticks(lo, hi):
        ty = TOP + plot_h * (1 - (t - lo) / (hi - lo))
        out.append(
            f'<line x1="{LEFT}" y1="{ty:.1f}" x2="{W - RIGHT}" y2="{ty:.1f}" stroke="#eee"/>'
            f'<text x="{LEFT - 4}" y="{ty + 4:.1f}" text-anchor="end" fill="#555">'
            f"{number(t)}</text>"
        )
    out.append(f'<text x="8" y="{TOP + plot_h / 2:.0f}" fill="#555">{escape(shown_unit)}</text>')
    band = [f"{x(i):.1f},{y(s.max):.1f}" for i, (_, s) in enumerate(points)]
    band += [f"{x(i):.1f},{y(s.min):.1f}" for i, (_, s) in reversed(list(enumerate(points)))]
    out.append(f'<polygon points="{" ".join(band)}" fill="{BAND_FILL}"/>')
    for attr, dash in (("p99", ' stroke-dasharray="5,3"'), ("mean", "")):
        line = " ".join(f"{x(i):.1f},{y(s.stat(attr)):.1f}" for i, (_, s) in enumerate(points))
        out.append(f'<polyline points="{line}" fill="none" stroke="{OK_COLOR}"{dash}/>')
    for b in bounds:
        out.append(
            f'<line x1="{LEFT}" y1="{y(b):.1f}" x2="{W - RIGHT}" y2="{y(b):.1f}" '
            f'stroke="{BAD_COLOR}" stroke-dasharray="3,3"/>'
        )
    for i, (run, s) in enumerate(points):
        tip = (
            f"run {run}: mean {number(s.mean / scale)}, p50 {number(s.p50 / scale)}, "
            f"p99 {number(s.p99 / scale)}, min {number(s.min / scale)}, "
            f"max {number(s.max / scale)} {shown_unit} over {s.count} values"
        )
        ring = flagged and i == len(points) - 1
        out.append(
            f'<circle cx="{x(i):.1f}" cy="{y(s.mean):.1f}" r="{5 if ring else 3}" '
            f'fill="{OK_COLOR}" stroke="{BAD_COLOR if ring else OK_COLOR}" '
            f'stroke-width="{2 if ring else 1}"><title>{escape(tip)}</title></circle>'
            f'<text x="{x(i):.1f}" y="{H - BOTTOM + 16}" text-anchor="middle" '
            f'fill="#555">{run}</text>'
        )
    out.append(
        f'<text x="{W - RIGHT}" y="{H - 4}" text-anchor="end" fill="#777">run · '
        "mean (line), p99 (dashed), min..max (band), threshold (red)</text></svg>"
    )
    return "".join(out)


def write_page(
    report: Path, nights: list[Night], flags: list[Flag], thresholds: Sequence[Threshold]
) -> Path:
    """``report/metrics/index.html`` and a ``.svg`` per series; the page's path."""
    page = report / PAGE_DIR
    page.mkdir(parents=True, exist_ok=True)
    flagged = {f.series for f in flags}
    names = {k: s.name for n in nights for k, s in n.series.items()}
    keys = sorted(names, key=lambda k: (k not in flagged, names[k], k))
    runs = f"runs {nights[0].run}..{nights[-1].run}" if nights else "no runs"
    body = [
        "<!doctype html><meta charset='utf-8'><title>hil metrics</title>",
        "<style>body{font-family:sans-serif;margin:16px} figure{display:inline-block;"
        "margin:6px}</style>",
        f"<h1>Metrics over the kept nights ({escape(runs)})</h1>",
    ]
    if flags:
        body.append("<h2>Past a threshold</h2><ul>")
        body += [f"<li>{escape(f.line())}</li>" for f in flags]
        body.append("</ul>")
    if not keys:
        body.append("<p>No run recorded a metric.</p>")
    for key in keys:
        points = [(n.run, n.series[key]) for n in nights if key in n.series]
        name = points[-1][1].name
        bounds = [
            b
            for t in thresholds
            if t.matches(name, key)
            for b in (t.above, t.below)
            if b is not None
        ]
        svg = chart(key, points, bounds, key in flagged)
        (page / f"{_slug(key)}.svg").write_text(svg)
        body.append(f"<figure>{svg}</figure>")
    index = page / "index.html"
    index.write_text("\n".join(body) + "\n")
    return index
