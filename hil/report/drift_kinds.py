"""What the nightly compares from night to night on a pair: the metric kinds of the drift
check (:mod:`hil.report.drift`), each with its default thresholds and why.

A kind picks its values out of what one night measured (:class:`Measured`), one value
per key: a categorical kind a text (``0``, ``-104,0``, ``ACK,FIN,SYN``), a numeric one a
number.  A new kind is one :func:`register_kind` and a ``pick``.

    wire       per test: the TCP flags seen on its connections, each MPA field's values
    status     per test, scenario, side and event type: the statuses the events carried
    bound      per metric series in us (connect_us, close_us, ...): the night's p99
    detection  per detection_us series (link pull, abort): the night's p99
    storm      per storm_* series (rates, step times): the night's mean
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from hil.judge.provenance import FLOOR_S, MARGIN
from hil.registry import Registry
from hil.report.metrics_history import SeriesStats

Value = str | float


@dataclass(frozen=True)
class Limits:
    """When a change is flagged and when it fails the nightly.

    Numeric kinds: ``flag`` and ``fail`` are factors (the night's value against the
    median of the nights before, either way: a timer that got shorter is a change too);
    ``fail`` needs the difference to reach ``floor`` too (the value's unit). Categorical
    kinds: every value the nights before never had is flagged; it fails unless ``fail``
    is None. ``fail`` None: never fails.
    """

    flag: float = 1.0
    fail: float | None = 1.0
    floor: float = 0.0


@dataclass(frozen=True)
class TestMeasured:
    """What one test showed: its events' statuses and what its wire carried."""

    test: str
    statuses: tuple[tuple[str, str, str, int], ...] = ()  # scenario, side, event type, status
    tcp_flags: frozenset[str] = frozenset()
    mpa: tuple[tuple[str, str, str], ...] = ()  # MPA kind (request, reply), field, value


@dataclass(frozen=True)
class Measured:
    """One night on one pair: each test's statuses and wire, the night's metric series."""

    tests: tuple[TestMeasured, ...] = ()
    series: Mapping[str, SeriesStats] = field(default_factory=dict)


@dataclass(frozen=True)
class MetricKind:
    """A kind of value the drift check compares; ``why`` says where its defaults come from."""

    name: str
    what: str
    numeric: bool
    limits: Limits
    why: str
    pick: Callable[[Measured], dict[str, Value]]


KINDS: Registry[MetricKind] = Registry("drift metric kind", name_of=lambda k: k.name)


def register_kind(kind: MetricKind) -> MetricKind:
    """Add a kind: every night's record gets its values, every comparison checks them."""
    return KINDS.register(kind)


def _joined(values: set[str]) -> str:
    return ",".join(sorted(values))


def pick_wire(m: Measured) -> dict[str, Value]:
    """Per test: the TCP flags its connections carried, and each MPA field's values."""
    out: dict[str, Value] = {}
    for t in m.tests:
        if t.tcp_flags:
            out[f"{t.test} tcp flags"] = _joined(set(t.tcp_flags))
        fields: dict[str, set[str]] = {}
        for kind, name, value in t.mpa:
            fields.setdefault(f"{t.test} mpa {kind}.{name}", set()).add(value)
        out.update({k: _joined(v) for k, v in fields.items()})
    return out


def pick_status(m: Measured) -> dict[str, Value]:
    """Per test, scenario, side and event type: the statuses its events carried."""
    found: dict[str, set[str]] = {}
    for t in m.tests:
        for scenario, side, event, status in t.statuses:
            found.setdefault(f"{t.test} {scenario} {side} {event}", set()).add(str(status))
    return {k: _joined(v) for k, v in found.items()}


def _series(m: Measured, keep: Callable[[SeriesStats], bool], stat: str) -> dict[str, Value]:
    return {k: s.stat(stat) for k, s in m.series.items() if keep(s)}


def _is_detection(s: SeriesStats) -> bool:
    return s.name == "detection_us"


def _is_storm(s: SeriesStats) -> bool:
    return s.name.startswith("storm_")


def _is_bound(s: SeriesStats) -> bool:
    return s.unit == "us" and not _is_detection(s) and not _is_storm(s)


US_PER_S = 1_000_000
# The margin rule of measured bounds (hil.judge.provenance, docs/profile-measure.md
# "Margin"): a bound is p99 x MARGIN, at least p99 + FLOOR_S. A p99 grown past that has
# used the margin its bound was given; below it the contract still holds, and TCG guests
# on a loaded lab run 2-3x slower (the same comment), so 1.5x is shown, not failed.
MARGIN_LIMITS = Limits(flag=1.5, fail=MARGIN, floor=FLOOR_S * US_PER_S)

register_kind(
    MetricKind(
        "wire",
        "the TCP flags and MPA fields (revision, marker, crc, reject, enhanced, ird, ord) "
        "each test's connections carried",
        numeric=False,
        limits=Limits(),
        why="the stack and its module parameters choose them, not the timing: MPA's "
        "revision, M and C bits and IRD/ORD (RFC 5044 section 7.1, RFC 6581 section 3) "
        "and whether a close is FINs or an RST (the close rules, docs/wire.md); a value no "
        "night before had is a new behaviour",
        pick=pick_wire,
    )
)
register_kind(
    MetricKind(
        "status",
        "the statuses of each test's CM events, per scenario, side and event type",
        numeric=False,
        limits=Limits(),
        why="a provider's statuses come from a fixed set (docs/event-statuses.md); 20 runs "
        "of each bound plan saw none outside it (docs/notes/profile-measure.md)",
        pick=pick_status,
    )
)
register_kind(
    MetricKind(
        "bound",
        "the night's p99 of each metric series in us (connect_us, close_us, "
        "destroy_blocked_us, ...): what the profile's bounds hold",
        numeric=True,
        limits=MARGIN_LIMITS,
        why=f"the margin rule: a measured bound is p99 x {MARGIN:g}, at least p99 + "
        f"{FLOOR_S:g} s (hil.judge.provenance); a p99 past that factor and floor has used "
        "the bound's margin; TCG guests run 2-3x slower under load, so 1.5x is only shown",
        pick=lambda m: _series(m, _is_bound, "p99"),
    )
)
register_kind(
    MetricKind(
        "detection",
        "the night's p99 of each detection_us series (link pull, abort)",
        numeric=True,
        limits=MARGIN_LIMITS,
        why="detection times are what admin_down_bound_s and its kin bound, set by the "
        "margin rule (docs/notes/profile-measure.md: admin_down p99 80 ms idle, 460 ms "
        "under traffic); the same factor and floor as bound",
        pick=lambda m: _series(m, _is_detection, "p99"),
    )
)
register_kind(
    MetricKind(
        "storm",
        "the night's mean of each storm_* series (storm_rate_per_s, storm_step_us, ...)",
        numeric=True,
        limits=Limits(flag=1.5, fail=8.0),
        why="a storm's rounds move 3-7x with the load the lab's neighbours put on the "
        "cores (docs/notes/storm-rate.md); only a change past that is the stack's",
        pick=lambda m: _series(m, _is_storm, "mean"),
    )
)
