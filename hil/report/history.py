"""A directory of consecutive runs, each with its Allure results and report.

    reports/
      runs/0007/results/   allure-pytest output of run 7 (+ history/ of run 6's report)
      runs/0007/report/    the generated report (index.html, history/ for run 8)
      latest -> runs/0007
      metrics.jsonl        one line per run: its metrics (hil.report.metrics_history)

Allure draws its trend graphs and flags flaky tests from ``history/`` of the
previous report copied into the new results before generating; keeping the
last N runs keeps N points of trend.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

from hil.errors import InputError

RUNS = "runs"
LATEST = "latest"


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
