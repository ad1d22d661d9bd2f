"""The metrics history a pipeline keeps: ``metrics.jsonl``, one line per run (night).

    {"run": 7, "time": "2026-12-01T02:00:03Z",
     "metrics": {"connect_us{scenario=close}": {"name": "connect_us",
                 "labels": {"scenario": "close"}, "unit": "us", "count": 4,
                 "mean": 2911.2, "min": 2410.0, "p50": 2870.0, "p99": 3500.0, "max": 3500.0},
                 ...}}

Each series (:func:`hil.report.metrics.series_key`) holds the statistics of the
values the run's tests recorded for it.  Lines written before labels and
percentiles (``{"mean", "count", "unit"}`` only) read back with every statistic
equal to the mean.  The trend charts (:mod:`hil.report.trend`) and the
threshold flags (:mod:`hil.report.metrics_flags`) read this file.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hil.errors import InputError
from hil.report.metrics import percentile, series_key

HISTORY = "metrics.jsonl"


@dataclass(frozen=True)
class SeriesStats:
    """What one run's values of one series come to."""

    name: str
    unit: str
    count: int
    mean: float
    min: float
    p50: float
    p99: float
    max: float
    labels: Mapping[str, str] = field(default_factory=dict)

    def stat(self, which: str) -> float:
        """``mean``, ``min``, ``p50``, ``p99`` or ``max``."""
        return float(getattr(self, which))


@dataclass(frozen=True)
class Night:
    """One run's line of the history."""

    run: int
    time: str
    series: Mapping[str, SeriesStats]

    def to_json(self) -> str:
        body = {k: {**asdict(s), "labels": dict(s.labels)} for k, s in self.series.items()}
        return json.dumps({"run": self.run, "time": self.time, "metrics": body}, sort_keys=True)


def aggregate(metrics: Iterable[Mapping[str, Any]]) -> dict[str, SeriesStats]:
    """The run's metrics (``hil-metrics.json`` entries) by series, with their statistics."""
    by_series: dict[str, list[Mapping[str, Any]]] = {}
    for m in metrics:
        labels = {str(k): str(v) for k, v in dict(m.get("labels") or {}).items()}
        by_series.setdefault(series_key(str(m["name"]), labels), []).append(m)
    found = {}
    for key, items in sorted(by_series.items()):
        values = [float(x["value"]) for x in items]
        found[key] = SeriesStats(
            name=str(items[0]["name"]),
            unit=str(items[0]["unit"]),
            count=len(values),
            mean=statistics.fmean(values),
            min=min(values),
            p50=percentile(values, 50),
            p99=percentile(values, 99),
            max=max(values),
            labels=dict(items[0].get("labels") or {}),
        )
    return found


def read_metric_files(paths: Iterable[Path]) -> list[dict[str, Any]]:
    """Every metric the run's processes wrote (``hil-metrics*.json``)."""
    found: list[dict[str, Any]] = []
    for path in paths:
        try:
            found += json.loads(path.read_text())
        except ValueError as e:
            raise InputError(f"{path}: not JSON: {e}") from None
    return found


def _series(key: str, data: Mapping[str, Any]) -> SeriesStats:
    mean = float(data["mean"])
    return SeriesStats(
        name=str(data.get("name", key)),
        unit=str(data.get("unit", "")),
        count=int(data.get("count", 1)),
        mean=mean,
        # Lines from before percentiles were kept: the mean is all that is known.
        **{s: float(data.get(s, mean)) for s in ("min", "p50", "p99", "max")},
        labels=dict(data.get("labels") or {}),
    )


def load(path: Path) -> list[Night]:
    """The history at ``path``, oldest first (empty when there is none)."""
    if not path.is_file():
        return []
    nights = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
            nights.append(
                Night(
                    int(data["run"]),
                    str(data.get("time", "")),
                    {k: _series(k, v) for k, v in data["metrics"].items()},
                )
            )
        except (ValueError, KeyError, TypeError) as e:
            raise InputError(f"{path}:{number}: not a metrics history line: {e}") from None
    return nights


def record(
    reports: Path, run: int, metrics: Iterable[Mapping[str, Any]], keep: int, now: datetime | None
) -> list[Night]:
    """Append run ``run``'s metrics to the history, keep the last ``keep`` nights, return them."""
    path = reports / HISTORY
    stamp = (now or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%SZ")
    nights = [*load(path), Night(run, stamp, aggregate(metrics))]
    nights = nights[-keep:] if keep > 0 else nights
    tmp = path.with_name(f".{HISTORY}.new")
    tmp.write_text("".join(n.to_json() + "\n" for n in nights))
    tmp.replace(path)
    return nights


def properties(nights: list[Night]) -> dict[str, str]:
    """``environment.properties`` lines: each series' last value and its trend.

    ``metric.connect_us = 4 ms over 1 values (runs 2..3: 2.5, 4)``.
    """
    keys = sorted({k for n in nights for k in n.series})
    props = {}
    for key in keys:
        points = [(n.run, n.series[key]) for n in nights if key in n.series]
        last = points[-1][1]
        scale, unit = display_unit(last.mean, last.unit)
        trend = ", ".join(number(s.mean / scale) for _, s in points)
        props[f"metric.{key}"] = (
            f"{number(last.mean / scale)} {unit} over {last.count} values "
            f"(runs {points[0][0]}..{points[-1][0]}: {trend})".replace("  ", " ")
        )
    return props


def display_unit(value: float, unit: str) -> tuple[float, str]:
    """A divisor and unit that keep a time readable: 2975236 us is 2975.2 ms, or 2.98 s."""
    if unit == "us" and abs(value) >= 1e6:
        return 1e6, "s"
    if unit == "us" and abs(value) >= 1e3:
        return 1e3, "ms"
    if unit == "ms" and abs(value) >= 1e3:
        return 1e3, "s"
    return 1.0, unit


def number(value: float) -> str:
    """Three significant decimals without exponent or trailing zeros: 190.874, 348, 2.98."""
    text = f"{value:.3f}" if abs(value) < 100 else f"{value:.1f}"
    return text.rstrip("0").rstrip(".") if "." in text else text
