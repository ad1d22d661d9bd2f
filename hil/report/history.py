"""A directory of consecutive runs, each with its Allure results and report.

    reports/
      runs/0007/results/   allure-pytest output of run 7 (+ history/ of run 6's report)
      runs/0007/report/    the generated report (index.html, history/ for run 8)
      latest -> runs/0007
      metrics.jsonl        one line per run: its metrics, for the trend on the overview

Allure draws its trend graphs and flags flaky tests from ``history/`` of the
previous report copied into the new results before generating; keeping the
last N runs keeps N points of trend.
"""

from __future__ import annotations

import json
import shutil
import statistics
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hil.errors import InputError

RUNS = "runs"
LATEST = "latest"
METRICS_HISTORY = "metrics.jsonl"


@dataclass(frozen=True)
class Run:
    """One run's place in the reports directory."""

    order: int
    path: Path

    @property
    def results(self) -> Path:
        return self.path / "results"

    @property
    def report(self) -> Path:
        return self.path / "report"


def runs(reports: Path) -> list[Run]:
    """The runs kept so far, oldest first."""
    base = reports / RUNS
    if not base.is_dir():
        return []
    found = [Run(int(p.name), p) for p in base.iterdir() if p.is_dir() and p.name.isdigit()]
    return sorted(found, key=lambda r: r.order)


def new_run(reports: Path) -> Run:
    """Make the next run's directory, its results already holding the last report's history."""
    previous = runs(reports)
    order = previous[-1].order + 1 if previous else 1
    run = Run(order, reports / RUNS / f"{order:04d}")
    try:
        run.results.mkdir(parents=True)
    except OSError as e:
        raise InputError(f"cannot make {run.results}: {e}") from None
    last_history = next(
        (r.report / "history" for r in reversed(previous) if (r.report / "history").is_dir()), None
    )
    if last_history is not None:
        shutil.copytree(last_history, run.results / "history")
    return run


def finish(reports: Path, run: Run, keep: int) -> None:
    """Point ``latest`` at ``run`` and delete all but the newest ``keep`` runs."""
    link = reports / LATEST
    tmp = reports / f".{LATEST}.new"
    tmp.unlink(missing_ok=True)
    tmp.symlink_to(run.path.relative_to(reports))
    tmp.replace(link)
    for old in runs(reports)[:-keep] if keep > 0 else []:
        shutil.rmtree(old.path, ignore_errors=True)


@dataclass(frozen=True)
class Summary:
    """How the tests of one report ended."""

    passed: int
    failed: int
    broken: int
    skipped: int
    unknown: int = 0

    @property
    def total(self) -> int:
        return self.passed + self.failed + self.broken + self.skipped + self.unknown

    def line(self) -> str:
        """``3 passed, 1 failed, 0 broken, 2 skipped``."""
        return (
            f"{self.passed} passed, {self.failed} failed, {self.broken} broken, "
            f"{self.skipped} skipped"
        )


def summary(report: Path) -> Summary:
    """The statistic of a generated report (its ``widgets/summary.json``)."""
    path = report / "widgets" / "summary.json"
    try:
        stat = json.loads(path.read_text())["statistic"]
    except (OSError, ValueError, KeyError) as e:
        raise InputError(f"{path}: not an Allure report summary: {e}") from None
    return Summary(
        *(int(stat.get(k, 0)) for k in ("passed", "failed", "broken", "skipped", "unknown"))
    )


def run_metrics(metrics: Iterable[dict[str, Any]]) -> dict[str, dict[str, float | str]]:
    """A run's metrics by name: the mean over its tests, the count and the unit."""
    by_name: dict[str, list[dict[str, Any]]] = {}
    for m in metrics:
        by_name.setdefault(m["name"], []).append(m)
    return {
        name: {
            "mean": statistics.fmean(float(x["value"]) for x in items),
            "count": len(items),
            "unit": items[0]["unit"],
        }
        for name, items in sorted(by_name.items())
    }


def record_metrics(
    reports: Path, run: Run, metrics_files: Iterable[Path], keep: int
) -> list[dict[str, Any]]:
    """Append this run's metrics to the history (last ``keep`` runs); return the history."""
    metrics: list[dict[str, Any]] = []
    for path in metrics_files:
        try:
            metrics += json.loads(path.read_text())
        except ValueError as e:
            raise InputError(f"{path}: not JSON: {e}") from None
    path = reports / METRICS_HISTORY
    lines = path.read_text().splitlines() if path.is_file() else []
    history = [json.loads(line) for line in lines if line.strip()]
    history.append({"run": run.order, "metrics": run_metrics(metrics)})
    history = history[-keep:] if keep > 0 else history
    path.write_text("".join(json.dumps(h, sort_keys=True) + "\n" for h in history))
    return history


def metric_properties(history: list[dict[str, Any]]) -> dict[str, str]:
    """``environment.properties`` lines that show each metric's trend on the overview.

    ``metric.connect_latency = 3.1 ms (runs 5..7: 2.9, 3.0, 3.1)``.
    """
    names = sorted({n for h in history for n in h["metrics"]})
    props = {}
    for name in names:
        points = [(h["run"], h["metrics"][name]) for h in history if name in h["metrics"]]
        last = points[-1][1]
        scale, unit = _display_unit(float(last["mean"]), str(last["unit"]))
        trend = ", ".join(_number(p["mean"] / scale) for _, p in points)
        props[f"metric.{name}"] = (
            f"{_number(last['mean'] / scale)} {unit} over "
            f"{last['count']} tests (runs {points[0][0]}..{points[-1][0]}: "
            f"{trend})".replace("  ", " ")
        )
    return props


def _display_unit(value: float, unit: str) -> tuple[float, str]:
    """A divisor and unit that keep a time readable: 2975236 us is 2975.2 ms, or 2.98 s."""
    if unit == "us" and value >= 1e6:
        return 1e6, "s"
    if unit == "us" and value >= 1e3:
        return 1e3, "ms"
    if unit == "ms" and value >= 1e3:
        return 1e3, "s"
    return 1.0, unit


def _number(value: float) -> str:
    """Three significant decimals without exponent or trailing zeros: 190.874, 348, 2.98."""
    text = f"{value:.3f}" if abs(value) < 100 else f"{value:.1f}"
    return text.rstrip("0").rstrip(".") if "." in text else text
