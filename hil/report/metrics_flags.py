"""Which metrics of the newest night are past a threshold (:mod:`hil.inventory.thresholds`).

The pipeline checks the newest line of the metrics history against the
inventory's thresholds and ``--threshold``; each series past one is a
:class:`Flag`, printed in the nightly summary and marked on the trend page.
A threshold that matched no series of the night is said too (a typo or a
suite that stopped recording it).  Flags do not change the exit status: they
are for the engineer watching the lab, not a test verdict.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from hil.inventory.thresholds import Threshold
from hil.report.metrics_history import Night, display_unit, number

Kind = Literal["above", "below", "rise", "fall"]


@dataclass(frozen=True)
class Flag:
    """One series of the night past one bound of a threshold."""

    series: str
    threshold: Threshold
    kind: Kind
    value: float
    unit: str
    baseline: float | None = None  # the earlier nights' median, for rise and fall

    def line(self) -> str:
        """``connect_us{scenario=close} p99 3.5 ms > 2 ms (lab.yaml:12)``."""
        t = self.threshold
        scale, unit = display_unit(self.value, self.unit)
        shown = f"{number(self.value / scale)} {unit}".strip()
        if self.kind in ("above", "below"):
            bound = t.above if self.kind == "above" else t.below
            assert bound is not None
            limit = f"{'>' if self.kind == 'above' else '<'} {number(bound / scale)} {unit}"
        else:
            assert self.baseline is not None
            pct = t.rise if self.kind == "rise" else t.fall
            change = (self.value - self.baseline) / abs(self.baseline) * 100
            base = f"{number(self.baseline / scale)} {unit}".strip()
            sign = "+" if self.kind == "rise" else "-"
            limit = (
                f"{change:+.0f}% against the median {base} of the nights before ({sign}{pct:g}%)"
            )
        return f"{self.series} {t.stat} {shown} {limit.strip()} ({t.source})"


def _past(t: Threshold, value: float, baseline: float | None) -> list[tuple[Kind, float | None]]:
    found: list[tuple[Kind, float | None]] = []
    if t.above is not None and value > t.above:
        found.append(("above", None))
    if t.below is not None and value < t.below:
        found.append(("below", None))
    if baseline is not None and baseline != 0:
        change = (value - baseline) / abs(baseline) * 100
        if t.rise is not None and change > t.rise:
            found.append(("rise", baseline))
        if t.fall is not None and -change > t.fall:
            found.append(("fall", baseline))
    return found


def check(nights: list[Night], thresholds: Iterable[Threshold]) -> tuple[list[Flag], list[str]]:
    """The newest night's flags, and the thresholds that matched none of its series."""
    if not nights:
        return [], []
    night, earlier = nights[-1], nights[:-1]
    flags: list[Flag] = []
    unmatched: list[str] = []
    for t in thresholds:
        keys = [k for k, s in night.series.items() if t.matches(s.name, k)]
        if not keys:
            unmatched.append(f"{t.metric} ({t.source})")
        for key in sorted(keys):
            s = night.series[key]
            value = s.stat(t.stat)
            before = [n.series[key].stat(t.stat) for n in earlier if key in n.series]
            baseline = statistics.median(before) if before else None
            flags += [
                Flag(key, t, kind, value, s.unit, base) for kind, base in _past(t, value, baseline)
            ]
    return flags, unmatched


def summary_lines(flags: list[Flag], unmatched: list[str], checked: int) -> list[str]:
    """The summary's threshold lines (none when no threshold was set)."""
    if not checked:
        return []
    if not flags:
        head = f"metrics: none past its threshold ({checked} thresholds)"
    else:
        head = f"metrics: {len(flags)} past a threshold ({checked} thresholds):"
    lines = [head, *(f"  {f.line()}" for f in flags)]
    lines += [f"  threshold matched no metric of this run: {u}" for u in unmatched]
    return lines
