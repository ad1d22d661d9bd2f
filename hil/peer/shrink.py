"""Shrinking a failing scenario: the fewest send steps, then the fewest overrides, that still fail.

Delta debugging (Zeller and Hildebrandt, "Simplifying and Isolating
Failure-Inducing Input", IEEE TSE 28(2), 2002: the ``ddmin`` algorithm) runs
twice: first over the scenario's send steps (its DUT actions, expects and
sleeps stay), then over the overrides of the sends left (each field override,
``segments``, ``coalesce_with_next`` and ``truncate``; an FPDU's opcode stays,
since its frame is built from it).  The result is 1-minimal: dropping any one
more send or override makes it pass.  ``fails`` runs a scenario on the DUT, so
each distinct scenario is run once (a cache), and the original is run again
first: a case that does not fail twice is reported as not reproduced,
unshrunk.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TypeVar

from hil.peer.scenario import Scenario, Send
from hil.peer.vocab import REQUIRED

T = TypeVar("T")
Unit = tuple[int, str]  # a send step's index and one of its overrides
_WAYS = ("segments", "coalesce_with_next", "truncate")


@dataclass(frozen=True)
class Shrunk:
    """The smallest failing scenario found, how many DUT runs it took, and whether it failed."""

    scenario: Scenario
    runs: int
    reproduced: bool


def ddmin(items: Sequence[T], fails: Callable[[list[T]], bool]) -> list[T]:
    """A 1-minimal sublist of ``items`` (which fail) that still fails; order is kept."""
    current = list(items)
    if current and fails([]):
        return []
    n = 2
    while len(current) >= 2:
        chunks = [current[i * len(current) // n : (i + 1) * len(current) // n] for i in range(n)]
        smaller = next((c for c in chunks if fails(c)), None)
        if smaller is not None:
            current, n = smaller, 2
            continue
        rests = [[x for c in chunks if c is not chunk for x in c] for chunk in chunks]
        rest = next((r for r in rests if fails(r)), None) if n > 2 else None
        if rest is not None:
            current, n = rest, max(n - 1, 2)
        elif n >= len(current):
            break
        else:
            n = min(2 * n, len(current))
    return current


def shrink(scenario: Scenario, fails: Callable[[Scenario], bool]) -> Shrunk:
    """``scenario`` cut to the fewest send steps and overrides for which ``fails`` holds."""
    seen: dict[Scenario, bool] = {}

    def check(candidate: Scenario) -> bool:
        if candidate not in seen:
            seen[candidate] = fails(candidate)
        return seen[candidate]

    if not check(scenario):
        return Shrunk(scenario, len(seen), reproduced=False)
    sends = [i for i, s in enumerate(scenario.steps) if isinstance(s, Send)]
    kept = ddmin(sends, lambda sub: check(_only_sends(scenario, set(sub))))
    scenario = _only_sends(scenario, set(kept))
    units = _units(scenario)
    kept_units = ddmin(units, lambda sub: check(_only_units(scenario, set(sub))))
    return Shrunk(_only_units(scenario, set(kept_units)), len(seen), reproduced=True)


def _only_sends(scenario: Scenario, kept: set[int]) -> Scenario:
    steps = (s for i, s in enumerate(scenario.steps) if not isinstance(s, Send) or i in kept)
    return replace(scenario, steps=tuple(steps))


def _units(scenario: Scenario) -> list[Unit]:
    """Every override of every send step that shrinking may drop."""
    units: list[Unit] = []
    for i, step in enumerate(scenario.steps):
        if isinstance(step, Send):
            required = REQUIRED.get(step.frame, ())
            units += [(i, name) for name, _ in step.fields if name not in required]
            units += [(i, way) for way in _WAYS if getattr(step, way) not in ((), False, None)]
    return units


def _only_units(scenario: Scenario, kept: set[Unit]) -> Scenario:
    steps = list(scenario.steps)
    for i, step in enumerate(steps):
        if isinstance(step, Send):
            steps[i] = _send_with(step, {name for j, name in kept if j == i})
    return replace(scenario, steps=tuple(steps))


def _send_with(send: Send, names: set[str]) -> Send:
    required = REQUIRED.get(send.frame, ())
    fields = tuple((n, v) for n, v in send.fields if n in names or n in required)
    return replace(
        send,
        fields=fields,
        segments=send.segments if "segments" in names else (),
        gap=send.gap if "segments" in names else 0.0,  # a gap lies between segments
        coalesce_with_next=send.coalesce_with_next and "coalesce_with_next" in names,
        truncate=send.truncate if "truncate" in names else None,
    )
