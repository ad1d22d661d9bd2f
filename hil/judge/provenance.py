"""Where each time bound of a provider profile comes from: :class:`Provenance`.

A bound is ``measured`` (runs on a lab pair: the command, how many runs, their p99,
the margin rule and the date), ``src`` (a timer or a wait in the driver's source:
file:line and kernel version) or ``inferred`` (reasoning, no measurement yet).  A
measured bound is held to :func:`loose_limit_s`, 3 x p99 + 100 ms (issue 25 item 8),
unless its provenance says why it is looser (``why_looser``).

The margin rule for measured bounds is :func:`propose_s`; ``bench/profile_measure.py``
prints its proposal beside the profile's value (docs/profile-measure.md).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

Kind = Literal["measured", "src", "inferred"]

# The margin rule (docs/profile-measure.md "Margin"): p99 x MARGIN, at least p99 + FLOOR_S.
# TCG guests on a shared 2-core machine run the same path 2-3 times slower under load
# than alone (other engineers' builds and tests share the cores); the floor covers a
# guest vCPU thread descheduled for a few host timeslices.
MARGIN = 2.5
FLOOR_S = 0.1
# Past this a measured bound needs its why_looser (issue 25 item 8).
LOOSE_FACTOR, LOOSE_SLACK_S = 3.0, 0.1


@dataclass(frozen=True)
class Provenance:
    """One bound's source.  ``basis``: for ``src`` the driver file:line and kernel
    version, for ``inferred`` the reasoning, for ``measured`` the metric measured.
    A ``measured`` one names its ``command``, ``runs``, ``p99_s``, ``margin`` rule
    and ``date``."""

    kind: Kind
    basis: str
    command: str = ""
    runs: int = 0
    p99_s: float | None = None
    margin: str = ""
    date: str = ""
    why_looser: str = ""

    def __post_init__(self) -> None:
        if not self.basis:
            raise ValueError(f"a {self.kind} provenance needs its basis")
        if self.kind == "measured":
            missing = [
                name
                for name, value in (
                    ("command", self.command),
                    ("runs", self.runs),
                    ("p99_s", self.p99_s),
                    ("margin", self.margin),
                    ("date", self.date),
                )
                if not value
            ]
            if missing:
                raise ValueError(f"measured provenance {self.basis!r} lacks {', '.join(missing)}")

    def __str__(self) -> str:
        if self.kind != "measured":
            return f"[{self.kind}] {self.basis}"
        return (
            f"[measured] {self.basis}: {self.runs} runs, p99 {(self.p99_s or 0) * 1e3:.1f} ms, "
            f"{self.margin} ({self.date}: {self.command})"
        )


def loose_limit_s(p99_s: float) -> float:
    """The loosest a measured bound may be without a ``why_looser``."""
    return LOOSE_FACTOR * p99_s + LOOSE_SLACK_S


def too_loose(bound_s: float, prov: Provenance) -> bool:
    """Whether a measured bound is looser than its p99 allows and says nothing of why."""
    if prov.kind != "measured" or prov.why_looser or prov.p99_s is None:
        return False
    return bound_s > loose_limit_s(prov.p99_s) + 1e-9


def problems(bounds: Mapping[str, float | None], said: Mapping[str, Provenance]) -> list[str]:
    """What is wrong with the provenance ``said`` of ``bounds`` (name: seconds, None for
    no bound): a bound without one, one for no such bound, a measured bound too loose."""
    found = [f"{name}: no provenance" for name in bounds if name not in said]
    found += [f"{name}: provenance of no such bound" for name in said if name not in bounds]
    for name, prov in said.items():
        value = bounds.get(name)
        if value is not None and too_loose(value, prov):
            found.append(
                f"{name}: {value:g} s is looser than 3 x p99 + 100 ms "
                f"({loose_limit_s(prov.p99_s or 0):.3f} s) and says no why_looser"
            )
    return found


def propose_s(p99_s: float, margin: float = MARGIN, floor_s: float = FLOOR_S) -> float:
    """A bound for measurements whose p99 is ``p99_s``: p99 x ``margin``, at least
    p99 + ``floor_s``, rounded up to 10 ms and never past :func:`loose_limit_s`."""
    raw = max(p99_s * margin, p99_s + floor_s)
    return min(math.ceil(raw * 100 - 1e-9) / 100, loose_limit_s(p99_s))


def margin_rule(margin: float = MARGIN, floor_s: float = FLOOR_S) -> str:
    """The margin rule in words, as a measured provenance names it."""
    return f"p99 x {margin:g}, at least p99 + {floor_s * 1e3:g} ms, rounded up to 10 ms"
