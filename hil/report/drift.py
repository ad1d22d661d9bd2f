"""Drift from night to night: one pair's night against the nights before it on the same pair.

Each night's record (:class:`NightRecord`) holds the values of every metric kind
(:mod:`hil.report.drift_kinds`) and the pair's stack: what the environment said it ran
(kernel, firmware, driver version, module parameters, rdma-core, ...).  :func:`compare`
finds the changes; each comes with what changed on the pair's stack since the night
before, and a change past its kind's fail threshold fails the nightly.

    before = history.load(...)                         # oldest first, same pair
    drift = compare(tonight, before, limits_of(["bound=1.5:3"]))
    print("\\n".join(summary_lines(drift)))
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from hil.errors import InputError
from hil.report.drift_kinds import KINDS, Limits, MetricKind, Value

PROPERTIES_SHOWN = 8  # drift.NN lines on the overview; all of them in summary.txt


@dataclass(frozen=True)
class NightRecord:
    """What one night measured on one pair, and what the pair ran."""

    run: int
    night: str  # when the night's first test started, UTC ISO 8601
    pair: str
    values: Mapping[str, Mapping[str, Value]]  # kind -> key -> value
    stack: Mapping[str, str]  # environment line -> value

    def to_json(self) -> str:
        body = {"run": self.run, "night": self.night, "pair": self.pair}
        body |= {"values": {k: dict(v) for k, v in self.values.items()}}
        return json.dumps({**body, "stack": dict(self.stack)}, indent=1, sort_keys=True)

    @classmethod
    def from_json(cls, text: str, where: str) -> NightRecord:
        """A record written by :meth:`to_json`; InputError naming ``where`` otherwise."""
        try:
            data: dict[str, Any] = json.loads(text)
            values = {str(k): dict(v) for k, v in data["values"].items()}
            return cls(
                int(data["run"]), str(data["night"]), str(data["pair"]), values, data["stack"]
            )
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise InputError(f"{where}: not a drift record ({type(e).__name__}: {e})") from None


@dataclass(frozen=True)
class Change:
    """A value of tonight that differs from the nights before."""

    kind: str
    key: str
    before: str
    now: str
    how: str  # "new value", "x2.7 the median", ...
    fails: bool

    def line(self) -> str:
        verdict = "FAILS" if self.fails else "flagged"
        return f"{verdict} {self.kind}: {self.key}: {self.before} -> {self.now} ({self.how})"


@dataclass(frozen=True)
class StackChange:
    """An environment line that differs from the night before (None: absent)."""

    key: str
    before: str | None
    now: str | None

    def line(self) -> str:
        return f"{self.key}: {self.before or '(none)'} -> {self.now or '(none)'}"


@dataclass(frozen=True)
class Drift:
    """Tonight against ``nights`` nights before it on ``pair``."""

    pair: str
    nights: int
    changes: tuple[Change, ...] = ()
    stack: tuple[StackChange, ...] = ()

    @property
    def fails(self) -> bool:
        return any(c.fails for c in self.changes)


def _number(v: float) -> str:
    return f"{v:.4g}"


def _numeric(
    kind: MetricKind, key: str, now: float, past: list[float], lim: Limits
) -> Change | None:
    base = statistics.median(past)
    if base == now:
        ratio = 1.0
    elif base <= 0 or now <= 0:
        ratio = math.inf
    else:
        ratio = max(now / base, base / now)
    how = f"x{now / base:.3g} the median of {len(past)} nights" if base > 0 else "from 0"
    fails = lim.fail is not None and ratio >= lim.fail and abs(now - base) >= lim.floor
    flagged = ratio >= lim.flag and ratio > 1.0
    return Change(kind.name, key, _number(base), _number(now), how, fails) if flagged else None


def _categorical(
    kind: MetricKind, key: str, now: str, past: list[str], lim: Limits
) -> Change | None:
    if now in past:
        return None
    how = f"no night of {len(past)} before had it"
    return Change(kind.name, key, past[-1], now, how, lim.fail is not None)


def _change(
    kind: MetricKind, key: str, now: Value, past: list[Value], lim: Limits
) -> Change | None:
    if kind.numeric:
        return _numeric(kind, key, float(now), [float(v) for v in past], lim)
    return _categorical(kind, key, str(now), [str(v) for v in past], lim)


def stack_changes(before: Mapping[str, str], now: Mapping[str, str]) -> tuple[StackChange, ...]:
    """The environment lines that differ between two nights."""
    keys = sorted(set(before) | set(now))
    return tuple(
        StackChange(k, before.get(k), now.get(k)) for k in keys if before.get(k) != now.get(k)
    )


def compare(now: NightRecord, before: Sequence[NightRecord], limits: Mapping[str, Limits]) -> Drift:
    """Tonight's changes against ``before`` (oldest first, same pair). A key no night
    before had is new, not a change; one tonight lacks (a test not run) is not compared."""
    changes: list[Change | None] = []
    for kind in KINDS:
        for key, value in sorted(now.values.get(kind.name, {}).items()):
            past = [n.values[kind.name][key] for n in before if key in n.values.get(kind.name, {})]
            if past:
                changes.append(_change(kind, key, value, past, limits[kind.name]))
    stack = stack_changes(before[-1].stack, now.stack) if before else ()
    found = tuple(c for c in changes if c is not None)
    return Drift(now.pair, len(before), found, stack if found else ())


def default_limits() -> dict[str, Limits]:
    """Every kind's own thresholds."""
    return {k.name: k.limits for k in KINDS}


def _factor(text: str, spec: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not value >= 1.0:
        raise InputError(f"drift threshold {spec!r}: {text!r} is not a factor of 1 or more")
    return value


def parse_threshold(spec: str, limits: Mapping[str, Limits]) -> tuple[str, Limits]:
    """``KIND=FLAG:FAIL`` (numeric kinds: factors, FAIL may be ``never``) or ``KIND=fail``,
    ``KIND=flag`` (categorical kinds: a change fails, or is only flagged)."""
    name, sep, value = spec.partition("=")
    kind = KINDS[name.strip()]
    if not sep:
        raise InputError(f"drift threshold {spec!r}: not KIND=VALUE (e.g. bound=1.5:2.5)")
    lim = limits[kind.name]
    if not kind.numeric:
        if value not in ("fail", "flag"):
            raise InputError(f"drift threshold {spec!r}: {kind.name} takes fail or flag")
        return kind.name, replace(lim, fail=1.0 if value == "fail" else None)
    flag, colon, fail = value.partition(":")
    if not colon:
        raise InputError(f"drift threshold {spec!r}: {kind.name} takes FLAG:FAIL (e.g. 1.5:2.5)")
    fails = None if fail == "never" else _factor(fail, spec)
    return kind.name, replace(lim, flag=_factor(flag, spec), fail=fails)


def limits_of(specs: Sequence[str]) -> dict[str, Limits]:
    """The default thresholds with ``specs`` (:func:`parse_threshold`) applied in order."""
    limits = default_limits()
    for spec in specs:
        name, lim = parse_threshold(spec, limits)
        limits[name] = lim
    return limits


def _head(drift: Drift) -> str:
    if not drift.nights:
        return f"drift: {drift.pair}: no history yet (tonight is its first night)"
    failing = sum(c.fails for c in drift.changes)
    nights = "the night" if drift.nights == 1 else f"the {drift.nights} nights"
    return (
        f"drift: {drift.pair}: {len(drift.changes)} changed against {nights} before, "
        f"{failing} past a fail threshold"
    )


def _stack_lines(drift: Drift) -> list[str]:
    if not drift.changes:
        return []
    if not drift.stack:
        return ["  on the pair since the night before: nothing changed in its environment"]
    return ["  on the pair since the night before:", *(f"    {s.line()}" for s in drift.stack)]


def summary_lines(drift: Drift) -> list[str]:
    """The summary's drift part: a head line, each change, what changed on the pair."""
    return [_head(drift), *(f"  {c.line()}" for c in drift.changes), *_stack_lines(drift)]


def properties(drift: Drift) -> dict[str, str]:
    """``environment.properties`` lines for the overview: the head, the first changes,
    what changed on the pair."""
    props = {"drift": _head(drift)[len("drift: ") :]}
    for i, c in enumerate(drift.changes[:PROPERTIES_SHOWN], 1):
        props[f"drift.{i:02d}"] = c.line()
    if drift.changes:
        props["drift.stack"] = "; ".join(s.line() for s in drift.stack) or "nothing changed"
    return props
