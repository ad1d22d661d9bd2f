"""Metric thresholds: when the nightly flags a metric (docs/inventory.md, "Thresholds").

In the inventory, by metric name (every series of it) or series key
(``name{k=v,...}``, quoted in YAML)::

    thresholds:
      connect_us: {stat: p99, above: 50000}          # flagged when the night's p99 > 50 ms
      "detection_us{scenario=link-pull-admin}": {above: 5000000, rise: 50}
      storm_rate_per_s: {below: 100, fall: 30}       # < 100/s, or 30% under the recent median

On the command line (``ci/nightly --threshold``, repeatable)::

    connect_us:p99>50000    storm_rate_per_s<100    connect_us>+50%    storm_rate_per_s<-30%

``above``/``below`` bound the night's value; ``rise``/``fall`` bound its change, in
percent, against the median of the nights before it.  ``stat`` picks the value:
``mean`` (default), ``min``, ``p50``, ``p99`` or ``max`` over the night's values.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Literal, get_args

from hil.errors import InputError
from hil.inventory.nodes import At, choice, entries, fields, given, number

Stat = Literal["mean", "min", "p50", "p99", "max"]
STATS: tuple[Stat, ...] = get_args(Stat)
KEYS = ("stat", "above", "below", "rise", "fall")
_SERIES = re.compile(r"[A-Za-z0-9_.-]+(\{[^{}]+\})?")
_CLI = re.compile(
    r"(?P<series>[^<>]+?)(?::(?P<stat>" + "|".join(STATS) + r"))?"
    r"(?P<op>[<>])(?P<sign>[+-]?)(?P<bound>[0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?)(?P<pct>%?)"
)
_BIG = 1e18


@dataclass(frozen=True)
class Threshold:
    """When a metric's series is flagged: its night value past ``above``/``below``, or
    moved by more than ``rise``/``fall`` percent against the earlier nights' median."""

    metric: str  # a metric name (all its series) or one series key name{k=v,...}
    stat: Stat = "mean"
    above: float | None = None
    below: float | None = None
    rise: float | None = None
    fall: float | None = None
    source: str = ""  # where it was set: "lab.yaml:12" or "--threshold"

    def matches(self, name: str, series: str) -> bool:
        """True for every series of the metric ``name``, or for the one series named."""
        return self.metric in (name, series)


def parse_cli(text: str) -> Threshold:
    """``NAME[:STAT](>|<)VALUE`` or ``NAME[:STAT]>+PCT%`` / ``<-PCT%``; InputError otherwise."""
    m = _CLI.fullmatch(text.strip())
    series = m["series"].strip() if m else ""
    if m is None or not _SERIES.fullmatch(series):
        raise InputError(
            f"--threshold {text!r}: expected NAME[:STAT]>VALUE, NAME[:STAT]<VALUE, "
            f"NAME[:STAT]>+PCT% or NAME[:STAT]<-PCT% (STAT one of {', '.join(STATS)}), "
            "e.g. connect_us:p99>50000"
        )
    value = float(m["bound"])
    stat: Stat = m["stat"] or "mean"  # type: ignore[assignment]
    if m["pct"]:
        if m["sign"] and m["sign"] != ("+" if m["op"] == ">" else "-"):
            raise InputError(f"--threshold {text!r}: a rise is >+PCT%, a fall <-PCT%")
        key = "rise" if m["op"] == ">" else "fall"
    elif m["sign"]:
        raise InputError(f"--threshold {text!r}: a signed bound needs % (a change)")
    else:
        key = "above" if m["op"] == ">" else "below"
    return Threshold(series, stat, source="--threshold", **{key: value})


def parse_section(at: At) -> tuple[Threshold, ...]:
    """The inventory's ``thresholds:`` mapping (located InventoryError on a bad entry)."""
    found = []
    for series, entry in entries(at).items():
        if not _SERIES.fullmatch(series):
            raise entry.error(f"{series!r} is not a metric name or series key name{{k=v,...}}")
        f = fields(entry, KEYS)
        bounds = {
            k: number(f[k], -_BIG if k in ("above", "below") else 0.0, _BIG)
            for k in KEYS[1:]
            if given(f, k)
        }
        if not bounds:
            raise entry.error("give at least one of above, below, rise, fall")
        if any(math.isnan(v) for v in bounds.values()):
            raise entry.error("a bound must be a number")
        stat: Stat = choice(f["stat"], STATS) if given(f, "stat") else "mean"  # type: ignore[assignment]
        source = f"{entry.file}:{entry.line}"
        found.append(Threshold(series, stat, source=source, **bounds))
    return tuple(found)
