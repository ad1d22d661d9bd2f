"""A storm's numbers: per-step latency percentiles (like cmtime's table) and its rates.

Built from the workers' stamps (``protocol.StormConn``: each step's
``[t_us, us]`` on its host's clock), so every number is one host's clock:
exact, no offset between hosts in it.  ``StormResult.metrics()`` flattens it
for a timeline; ``StepStats.percentiles()`` is the shape the metrics history
takes (``hil_metrics.percentiles``, docs/reports.md).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

# The active side's steps, in the order a storm runs them (cmtime's names in docs/storm.md).
ACTIVE_STEPS = (
    "create_id",
    "resolve_addr",
    "resolve_route",
    "create_qp",
    "connect",
    "traffic",
    "disconnect",
    "destroy",
)
# The passive side's: CONNECT_REQUEST to accept returned; accept to ESTABLISHED; destroy.
PASSIVE_STEPS = ("accept", "established", "destroy")


def percentile(ordered: Sequence[int], q: float) -> int:
    """The nearest-rank ``q`` percentile (0 < q <= 100) of ascending ``ordered``."""
    if not ordered:
        raise ValueError("no values")
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


@dataclass(frozen=True)
class StepStats:
    """One step over all connections that completed it: latency percentiles (µs) and its
    span, first start to last end (cmtime's "total" for the step)."""

    step: str
    n: int
    p50_us: int
    p99_us: int
    max_us: int
    span_us: int

    @classmethod
    def of(cls, step: str, stamps: Iterable[Sequence[int]]) -> StepStats | None:
        """From ``[t_us, us]`` pairs (one host's clock); None when there are none."""
        pairs = [(int(t), int(us)) for t, us in stamps]
        if not pairs:
            return None
        took = sorted(us for _, us in pairs)
        span = max(t + us for t, us in pairs) - min(t for t, _ in pairs)
        return cls(
            step, len(pairs), percentile(took, 50), percentile(took, 99), took[-1], max(0, span)
        )

    def percentiles(self) -> dict[str, float]:
        """``{"p50", "p99", "max"}`` in µs: the metrics history's shape."""
        return {"p50": self.p50_us, "p99": self.p99_us, "max": self.max_us}


@dataclass(frozen=True)
class StormResult:
    """What one storm did and how fast.

    ``rate_per_s`` is cmtime's measure: connections / (connect span +
    disconnect span), so the two are comparable; ``cycle_rate_per_s`` covers
    every step, first create_id to last destroy.  ``backlog`` is the listener's
    effective backlog (the asked one, capped by ``net.rdma_ucm.max_backlog``)
    and ``expected_rejects`` what that backlog lets through when the passive
    side held its requests unread (0 when it did not).
    """

    count: int
    processes: int
    listeners: int
    backlog: int
    max_backlog: int
    expected_rejects: int
    established: int
    rejected: int
    failed: tuple[str, ...]  # "tag: result" of each connection that failed otherwise
    closed_active: int  # connections whose active side saw its DISCONNECTED
    closed_passive: int  # ... whose passive side saw its DISCONNECTED
    steps: tuple[StepStats, ...]
    passive_steps: tuple[StepStats, ...]
    rate_per_s: float
    cycle_rate_per_s: float

    def step(self, name: str, passive: bool = False) -> StepStats | None:
        """The stats of step ``name`` (active side unless ``passive``), None if none ran."""
        return next(
            (s for s in (self.passive_steps if passive else self.steps) if s.step == name), None
        )

    def metrics(self) -> dict[str, float]:
        """Flat numbers for a timeline's metrics (µs, counts, 1/s)."""
        out: dict[str, float] = {
            "storm_count": self.count,
            "storm_established": self.established,
            "storm_rejected": self.rejected,
            "storm_closed_active": self.closed_active,
            "storm_closed_passive": self.closed_passive,
            "storm_rate_per_s": self.rate_per_s,
            "cycle_rate_per_s": self.cycle_rate_per_s,
        }
        for side, stats in (("", self.steps), ("passive_", self.passive_steps)):
            for s in stats:
                for stat, value in s.percentiles().items():
                    out[f"storm_{side}{s.step}_{stat}_us"] = value
        return out

    def table(self) -> str:
        """A cmtime-like table: one row per step, µs."""
        rows = [f"{'step':<22}{'n':>5}{'p50':>10}{'p99':>10}{'max':>10}{'span':>10}"]
        for side, stats in (("", self.steps), ("passive ", self.passive_steps)):
            rows += [
                f"{side + s.step:<22}{s.n:>5}{s.p50_us:>10}{s.p99_us:>10}{s.max_us:>10}"
                f"{s.span_us:>10}"
                for s in stats
            ]
        rows.append(
            f"{self.count} connections ({self.processes} processes, {self.listeners} "
            f"listeners): {self.established} established, {self.rejected} rejected, "
            f"closed {self.closed_active} active / {self.closed_passive} passive; "
            f"{self.rate_per_s:.1f} conn/s connect+disconnect, "
            f"{self.cycle_rate_per_s:.1f} conn/s full cycle"
        )
        return "\n".join(rows)


def stats(by_step: dict[str, list[list[int]]], order: Sequence[str]) -> tuple[StepStats, ...]:
    """The :class:`StepStats` of every step in ``order`` that has stamps."""
    return tuple(s for name in order if (s := StepStats.of(name, by_step.get(name, []))))


def rate(n: int, *spans: StepStats | None) -> float:
    """``n`` connections over the summed spans (1/s); 0 when a span is missing."""
    if n == 0 or any(s is None for s in spans):
        return 0.0
    total = sum(s.span_us for s in spans if s is not None)
    return n / max(1e-6, total / 1e6)
