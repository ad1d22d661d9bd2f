"""Metrics: the numbers a test measures, with labels, kept for the nightly's trends.

A metric is a name, a value, a unit and labels (``scenario=close``,
``step=connect``, ``race=destroy_vs_reply``): one *series* per name and label
set, written ``name{k=v,...}`` (the key of the history, the trend charts and
the thresholds, :mod:`hil.report.metrics_history`).  Tests record through the
``hil_metrics`` fixture (:mod:`hil.report.metricsfixture`, the same methods as
:data:`RECORDER`); library code calls :data:`RECORDER` or
:func:`hil.report.attach.metric`::

    hil_metrics.record("cycle_rate_per_s", 812.4, "1/s", sequence="storm", n="64")
    hil_metrics.distribution("storm_step_us", samples_us, "us", step="connect")
    hil_metrics.percentiles("storm_step_us", {"p50": 810, "p99": 3100, "max": 4200}, "us",
                            step="connect")
    hil_metrics.coverage("destroy_vs_reply", {"before": 9, "during": 2, "after": 0},
                         wanted=("before", "during", "after"))

Every timeline's metrics (``Timeline.metrics``: ``connect_us``,
``destroy_blocked_us``, ``detection_us``...) are recorded with the label
``scenario`` when the report attaches the timeline.  The plugin names the
current test and writes every metric of the session to ``hil-metrics.json``
in the Allure results (``--hil-metric-label K=V`` adds a label to all of
them, e.g. the kernel of a nightly's matrix leg).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from hil.errors import InputError

Stat = Literal["p50", "p99", "max"]
STATS: tuple[Stat, ...] = get_args(Stat)
# Label names and values end up in series keys ``name{k=v,...}``: none of ``{}=,``.
_FORBIDDEN = set("{}=,\n")


@dataclass(frozen=True)
class Metric:
    """One number a test measured (connect latency, detection time, storm rate)."""

    test: str
    name: str
    value: float
    unit: str
    labels: Mapping[str, str] = field(default_factory=dict)

    @property
    def series(self) -> str:
        """The series this value belongs to: ``name{k=v,...}`` (labels sorted)."""
        return series_key(self.name, self.labels)

    def to_json(self) -> dict[str, Any]:
        """The metric as ``hil-metrics.json`` holds it."""
        return {
            "test": self.test,
            "name": self.name,
            "value": self.value,
            "unit": self.unit,
            "labels": dict(self.labels),
        }


def series_key(name: str, labels: Mapping[str, str]) -> str:
    """``connect_us{scenario=close}``; the bare name when there are no labels."""
    if not labels:
        return name
    return name + "{" + ",".join(f"{k}={v}" for k, v in sorted(labels.items())) + "}"


def check_label(key: str, value: str) -> None:
    """InputError when a label cannot be part of a series key."""
    for text in (key, value):
        if not text or _FORBIDDEN & set(text):
            raise InputError(
                f"metric label {key}={value}: names and values must be non-empty and "
                "hold none of '{', '}', '=', ','"
            )


def percentile(samples: Iterable[float], pct: float) -> float:
    """The nearest-rank percentile (p50 of 1..4 is 2, p99 of 100 samples the 99th)."""
    ordered = sorted(float(s) for s in samples)
    if not ordered:
        raise ValueError("no samples")
    return ordered[max(0, math.ceil(pct / 100 * len(ordered)) - 1)]


def summarize(samples: Iterable[float]) -> dict[str, float]:
    """p50, p99 and max of ``samples`` (cmtime's table shows the same)."""
    values = list(samples)
    return {"p50": percentile(values, 50), "p99": percentile(values, 99), "max": max(values)}


class Recorder:
    """The metrics of this process's session, each with the test it belongs to.

    The plugin sets ``current_test`` and ``run_labels``; recording is thread-safe
    (a CM worker thread may record while the test waits).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.current_test = ""
        self.run_labels: dict[str, str] = {}
        self._items: list[Metric] = []

    def record(self, name: str, value: float, unit: str, **labels: str) -> Metric:
        """One value of the current test: ``record("close_us", 812.0, "us", by="passive")``."""
        if not name or _FORBIDDEN & set(name):
            raise InputError(f"metric name {name!r}: non-empty, none of '{{', '}}', '=', ','")
        merged = {**self.run_labels, **{k: str(v) for k, v in labels.items()}}
        for k, v in merged.items():
            check_label(k, v)
        m = Metric(self.current_test, name, float(value), unit, merged)
        with self._lock:
            self._items.append(m)
        return m

    def percentiles(
        self, name: str, stats: Mapping[str, float], unit: str, **labels: str
    ) -> list[Metric]:
        """Percentiles computed elsewhere (a host-side storm's), one metric each with
        the label ``stat`` (``p50``, ``p99``, ``max``; other keys are refused)."""
        unknown = sorted(set(stats) - set(STATS))
        if unknown:
            raise InputError(f"metric {name}: unknown statistics {unknown} (known: {STATS})")
        return [self.record(name, stats[s], unit, **labels, stat=s) for s in STATS if s in stats]

    def distribution(
        self, name: str, samples: Iterable[float], unit: str, **labels: str
    ) -> list[Metric]:
        """p50, p99 and max of raw samples (e.g. each connection's connect time)."""
        values = list(samples)
        if not values:
            raise InputError(f"metric {name}: no samples to summarize")
        return self.percentiles(name, summarize(values), unit, **labels)

    def coverage(
        self, race: str, counts: Mapping[str, int], wanted: Collection[str], **labels: str
    ) -> list[Metric]:
        """A race sweep's coverage: ``race_rounds{order=O,race=R}`` per order and
        ``race_orders_reached{race=R}``, the share of ``wanted`` orders reached at least once."""
        found = [
            self.record("race_rounds", counts.get(o, 0), "rounds", **labels, race=race, order=o)
            for o in sorted({*wanted, *counts})
        ]
        reached = sum(1 for o in wanted if counts.get(o, 0) > 0)
        share = reached / len(wanted) if wanted else 1.0
        found.append(self.record("race_orders_reached", share, "ratio", **labels, race=race))
        return found

    def of_test(self, test: str) -> list[Metric]:
        """What ``test`` recorded, in order."""
        with self._lock:
            return [m for m in self._items if m.test == test]

    def all(self) -> list[Metric]:
        """Every metric of the session, in order."""
        with self._lock:
            return list(self._items)


RECORDER = Recorder()
