"""What every race sweep shares: the race's names, the sweep's budget, its rounds and counts.

A race names two actions and the event between them (:class:`Race`) and the
orders a round can fall in.  A sweep (one module per race in this package)
runs rounds at offsets over a window (:class:`Budget`), classifies each round
by the order that actually happened, read from the stamps, and gives a
:class:`RaceSweep`: the rounds, the count per order, and "race window not
reached" when an order it exists for was never hit.  :func:`drive` runs the
batches: offsets spread over the window (ends and middle first), so that a
bounded sweep that stops early once every wanted order was seen ``enough``
times has still tried the whole window.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from hil.cm.registry import sequence
from hil.errors import InputError
from hil.judge.timeline import Timeline

if TYPE_CHECKING:
    from hil.cm.sides import PairSides

UNCLEAR = "unclear"  # every race's order for a round the stamps cannot place


@dataclass(frozen=True)
class Race:
    """A race: its title, its two actions, the event between them, the orders a round takes.

    ``certain``: the orders the TCG lab reaches in every run (a bounded sweep
    asks for these; the full sweep for all of ``orders``).  ``sweep(s, budget,
    wanted)`` runs it on a pair and gives a :class:`RaceSweep`."""

    name: str
    title: str
    actions: tuple[str, str]
    event: str
    orders: tuple[str, ...]
    certain: tuple[str, ...]
    sweep: Callable[..., RaceSweep]
    full: Budget  # the full sweep's budget: ``hil cm run race_<name>``'s defaults


RACES: dict[str, Race] = {}


def register(race: Race) -> Race:
    """Register ``race`` under its name (``hil.cm.races.RACES``), and its full sweep as the
    sequence ``race_<name>`` (its timeline carries :meth:`RaceSweep.metrics`); a second
    race of that name is an error."""
    known = RACES.get(race.name)
    if known is not None and known.sweep is not race.sweep:
        raise InputError(f"race {race.name!r} is registered already")
    RACES[race.name] = race
    sequence(_sequence_of(race))
    return race


def _sequence_of(race: Race) -> Callable[..., Timeline]:
    full = race.full

    def sweep(
        s: PairSides,
        window_us: int = full.window_us,
        step_us: int = full.step_us,
        rounds: int = full.rounds,
    ) -> Timeline:
        return race.sweep(s, Budget(window_us, step_us, rounds)).timeline_with_metrics()

    sweep.__name__ = sweep.__qualname__ = f"race_{race.name}"
    sweep.__module__ = race.sweep.__module__
    sweep.__doc__ = f"Sweep {race.title}; rounds counted per order."
    return sweep


@dataclass(frozen=True)
class Budget:
    """Offsets ``-window_us .. +window_us`` by ``step_us``, ``rounds`` per offset.

    ``enough``: stop once every wanted order was reached this many times (None:
    the full sweep); ``max_rounds``: never more rounds than this."""

    window_us: int
    step_us: int
    rounds: int = 2
    enough: int | None = None
    max_rounds: int | None = None

    def __post_init__(self) -> None:
        if self.window_us < 0 or self.step_us <= 0 or not 1 <= self.rounds <= 100:
            raise InputError("window_us >= 0, step_us > 0 and rounds 1..100, please")
        if self.enough is not None and self.enough < 1:
            raise InputError(f"enough must be at least 1, not {self.enough}")
        if self.max_rounds is not None and self.max_rounds < 1:
            raise InputError(f"max_rounds must be at least 1, not {self.max_rounds}")

    def offsets(self) -> list[int]:
        """The window's offsets, spread: both ends, the middle, then ever finer halves."""
        return spread(list(range(-self.window_us, self.window_us + 1, self.step_us)))

    def describe(self) -> str:
        """The budget in a few words, for a summary."""
        stop = f", stop at {self.enough} of each" if self.enough else ""
        cap = f", at most {self.max_rounds}" if self.max_rounds else ""
        return f"{self.rounds} per {self.step_us} µs step{stop}{cap}"


def spread(values: Sequence[int]) -> list[int]:
    """``values`` reordered: first, last, middle, then the middles of each half in turn."""
    n = len(values)
    if n <= 2:
        return list(values)
    picked = [0, n - 1]
    halves = deque([(0, n - 1)])
    while halves:
        lo, hi = halves.popleft()
        if hi - lo < 2:
            continue
        mid = (lo + hi) // 2
        picked.append(mid)
        halves += [(lo, mid), (mid, hi)]
    return [values[i] for i in picked]


@dataclass(frozen=True)
class Round:
    """One round: what it asked for, and the order that happened (``why``: the stamps).

    ``ids``: the round's cm_ids (timeline ids); ``us``: how long the racing call
    took (a destroy's block, a reject's)."""

    label: str
    offset_us: int
    delay_us: int
    order: str
    why: str
    ids: tuple[str | None, ...] = ()
    us: int | None = None


@dataclass(frozen=True)
class RaceSweep:
    """A sweep's rounds, the orders it exists for, and the judged timeline of them all."""

    race: Race
    rounds: tuple[Round, ...]
    wanted: tuple[str, ...]
    uncertainty_us: int
    timeline: Timeline
    around: str = ""  # what the offsets are measured from ("the reply's 12.0 ms")
    stopped_early: bool = False

    def counts(self) -> dict[str, int]:
        """How many rounds hit each order (every order, 0 included)."""
        seen = Counter(r.order for r in self.rounds)
        return {o: seen.get(o, 0) for o in (*self.race.orders, UNCLEAR)}

    def summary(self) -> str:
        """One line: the race, the rounds, the window and the count of each order."""
        offsets = [r.offset_us for r in self.rounds]
        window = f"{min(offsets) / 1e3:+.1f}..{max(offsets) / 1e3:+.1f} ms" if offsets else "-"
        counts = ", ".join(f"{o} {n}" for o, n in self.counts().items())
        around = f" around {self.around}" if self.around else ""
        early = " (stopped early: every wanted order reached)" if self.stopped_early else ""
        return (
            f"{self.race.title}: {len(self.rounds)} rounds, offsets {window}{around}, "
            f"clocks +/- {self.uncertainty_us / 1e3:.1f} ms: {counts}{early}"
        )

    def not_reached(self) -> str | None:
        """ "race window not reached: ..." when an order it exists for was never hit."""
        missing = [o for o in self.wanted if not self.counts()[o]]
        if not missing:
            return None
        return f"race window not reached: no round {' or '.join(missing)} ({self.summary()})"

    def table(self) -> str:
        """Every round, one a line: label, offset, delay, order and why."""
        return "\n".join(
            f"{r.label} offset {r.offset_us:+d} µs delay {r.delay_us} µs: {r.order} ({r.why})"
            for r in self.rounds
        )

    def timeline_with_metrics(self) -> Timeline:
        """The sweep's timeline carrying its :meth:`metrics` (what a ``race_*`` sequence gives)."""
        return replace(self.timeline, metrics={**self.timeline.metrics, **self.metrics()})

    def metrics(self) -> dict[str, float]:
        """The sweep's coverage as metrics: rounds per order, the clocks' uncertainty."""
        got = {f"rounds_{o}": float(n) for o, n in self.counts().items()}
        got["rounds"] = float(len(self.rounds))
        got["clock_uncertainty_us"] = float(self.uncertainty_us)
        return got


def drive(
    budget: Budget,
    wanted: Sequence[str],
    batch: Callable[[int, int], object],
    classify: Callable[[], Sequence[Round]],
) -> bool:
    """Run ``batch(offset, rounds)`` for each of the budget's offsets (spread) until every
    wanted order was reached ``budget.enough`` times (``classify()``: every round so
    far) or ``max_rounds`` ran.  True when it stopped early: every wanted order seen."""
    ran = 0
    for offset in budget.offsets():
        n = (
            budget.rounds
            if budget.max_rounds is None
            else min(budget.rounds, budget.max_rounds - ran)
        )
        if n <= 0:
            break
        batch(offset, n)
        ran += n
        if budget.enough is not None:
            seen = Counter(r.order for r in classify())
            if all(seen[o] >= budget.enough for o in wanted):
                return True
    return False


def cross_host_uncertainty(tl: Timeline) -> int:
    """How far apart two stamps of the pair's two hosts may be off (µs)."""
    return tl.uncertainty_us(*tl.pair)
