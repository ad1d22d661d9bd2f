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
from itertools import cycle
from typing import TYPE_CHECKING

from hil.cm.registry import sequence
from hil.errors import InputError
from hil.judge.timeline import Timeline
from hil.registry import Registry

if TYPE_CHECKING:
    from hil.cm.sides import PairSides

UNCLEAR = "unclear"  # every race's order for a round the stamps cannot place


@dataclass(frozen=True)
class Race:
    """A race: its title, its two actions, the event between them, the orders a round takes.

    ``certain``: the orders a small bounded sweep reaches in every run on the TCG
    lab without aiming or many rounds (tests/cm/test_races_lab.py's reject_request
    sweep asks for just these); ``aimed``: the orders that live in the narrow
    window the sweep aims at (a bounded sweep missing only these spends its
    remaining rounds there: :func:`drive`).  suites/test_races.py asks for all of
    ``orders``.  ``sweep(s, budget, wanted)`` runs it on a pair and gives a
    :class:`RaceSweep`."""

    name: str
    title: str
    actions: tuple[str, str]
    event: str
    orders: tuple[str, ...]
    certain: tuple[str, ...]
    sweep: Callable[..., RaceSweep]
    full: Budget  # the full sweep's budget: ``hil cm run race_<name>``'s defaults
    aimed: tuple[str, ...] = ()


# A module imported twice registers its race twice: the same sweep is the same race.
RACES = Registry[Race]("race", name_of=lambda r: r.name, same=lambda a, b: a.sweep is b.sweep)


def register(race: Race) -> Race:
    """Register ``race`` under its name (``hil.cm.races.RACES``), and its full sweep as the
    sequence ``race_<name>`` (its timeline carries :meth:`RaceSweep.metrics`); a second
    race of that name is an error."""
    RACES.register(race)
    sequence(_sequence_of(race))
    return race


def _sequence_of(race: Race) -> Callable[..., Timeline]:
    full = race.full

    def sweep(
        s: PairSides,
        window_us: int = full.window_us,
        step_us: int = full.step_us,
        rounds: int = full.rounds,
        hold_us: int = full.hold_us,
    ) -> Timeline:
        if hold_us and not full.hold_us:
            raise InputError(f"race {race.name} holds no frames back: it takes no hold_us")
        budget = Budget(window_us, step_us, rounds, hold_us=hold_us)
        return race.sweep(s, budget).timeline_with_metrics()

    sweep.__name__ = sweep.__qualname__ = f"race_{race.name}"
    sweep.__module__ = race.sweep.__module__
    sweep.__doc__ = f"Sweep {race.title}; rounds counted per order."
    return sweep


@dataclass(frozen=True)
class Budget:
    """Offsets ``-window_us .. +window_us`` by ``step_us``, ``rounds`` per offset.

    ``enough``: stop once every wanted order was reached this many times (None:
    the full sweep); ``max_rounds``: never more rounds than this; ``focus_us``:
    the offsets within this of the centre (where a race aims its narrow window)
    come right after the two ends, nearest first, and a bounded sweep that misses
    only its aimed orders goes round them again until the cap (:func:`drive`), with
    ``chase_rounds`` rounds per offset there (default ``rounds``: fewer batches, so less
    of each batch's fixed cost); ``hold_us``: the passive host's frames are held back this
    long on the wire for the sweep (:mod:`hil.cm.races.hold`), which widens a middle order
    that lives while a frame is on its way by as much (0: none)."""

    window_us: int
    step_us: int
    rounds: int = 2
    enough: int | None = None
    max_rounds: int | None = None
    focus_us: int = 0
    chase_rounds: int | None = None
    hold_us: int = 0

    def __post_init__(self) -> None:
        if self.window_us < 0 or self.step_us <= 0 or not 1 <= self.rounds <= 100:
            raise InputError("window_us >= 0, step_us > 0 and rounds 1..100, please")
        if self.chase_rounds is not None and not 1 <= self.chase_rounds <= 100:
            raise InputError(f"chase_rounds must be 1..100, not {self.chase_rounds}")
        if self.enough is not None and self.enough < 1:
            raise InputError(f"enough must be at least 1, not {self.enough}")
        if self.max_rounds is not None and self.max_rounds < 1:
            raise InputError(f"max_rounds must be at least 1, not {self.max_rounds}")
        if self.focus_us < 0:
            raise InputError(f"focus_us must be at least 0, not {self.focus_us}")
        if self.hold_us < 0:
            raise InputError(f"hold_us must be at least 0, not {self.hold_us}")

    def offsets(self) -> list[int]:
        """The window's offsets, spread: both ends, the middle, then ever finer halves;
        with ``focus_us``, both ends, then the focus nearest the centre first, then the rest."""
        spread_out = spread(list(range(-self.window_us, self.window_us + 1, self.step_us)))
        if not self.focus_us:
            return spread_out
        ends, rest = spread_out[:2], spread_out[2:]
        near = [o for o in self.focus() if o in rest]
        return ends + near + [o for o in rest if abs(o) > self.focus_us]

    def focus(self) -> list[int]:
        """The window's offsets within ``focus_us`` of the centre, nearest first."""
        steps = range(-self.window_us, self.window_us + 1, self.step_us)
        return sorted((o for o in steps if abs(o) <= self.focus_us), key=lambda o: (abs(o), o))

    def scaled(self, factor: float) -> Budget:
        """The same budget over a window ``factor`` times as wide, in steps as many times
        longer (as many rounds), its hold as many times longer: for a kernel whose CM is
        that much slower (where a held frame's sender sees its own close that much later,
        and its receiver is that much longer busy taking the frame in)."""
        if factor < 1:
            raise InputError(f"a budget widens by a factor of at least 1, not {factor}")
        return replace(
            self,
            window_us=round(self.window_us * factor),
            step_us=round(self.step_us * factor),
            focus_us=round(self.focus_us * factor),
            hold_us=round(self.hold_us * factor),
        )

    def describe(self) -> str:
        """The budget in a few words, for a summary."""
        stop = f", stop at {self.enough} of each" if self.enough else ""
        cap = f", at most {self.max_rounds}" if self.max_rounds else ""
        chase = f" ({self.chase_rounds} each)" if self.chase_rounds else ""
        focus = (
            f", +/- {self.focus_us} µs first and while only the aimed order is missing{chase}"
            if self.focus_us
            else ""
        )
        hold = f", the peer's frames held back {self.hold_us} µs" if self.hold_us else ""
        return f"{self.rounds} per {self.step_us} µs step{focus}{stop}{cap}{hold}"


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
    aimed: Sequence[str] = (),
) -> bool:
    """Run ``batch(offset, rounds)`` for each of the budget's offsets (spread) until every
    wanted order was reached ``budget.enough`` times (``classify()``: every round so
    far) or ``max_rounds`` ran.  True when it stopped early: every wanted order seen.

    A bounded sweep with a focus whose only missing orders are ``aimed`` ones (the
    narrow middle order: the outer ones are reached at the window's ends) spends its
    remaining rounds on the focus, round and round, nearest the aim first, instead of
    the window's far offsets, which cannot reach it, until ``max_rounds``."""
    ran = 0
    spread_out = iter(budget.offsets())
    # Round and round only with a cap: without one the sweep would never end.
    bounded = budget.enough is not None and budget.max_rounds is not None
    chase = cycle(budget.focus()) if bounded and budget.focus_us else None
    missing: list[str] = list(wanted)
    while budget.max_rounds is None or ran < budget.max_rounds:
        rounds = budget.rounds
        if chase is not None and set(missing) <= set(aimed):
            offset: int | None = next(chase)
            rounds = budget.chase_rounds or rounds
        else:
            offset = next(spread_out, None)
        if offset is None:
            break
        n = rounds if budget.max_rounds is None else min(rounds, budget.max_rounds - ran)
        batch(offset, n)
        ran += n
        if budget.enough is not None:
            seen = Counter(r.order for r in classify())
            missing = [o for o in wanted if seen[o] < budget.enough]
            if not missing:
                return True
    return False


def cross_host_uncertainty(tl: Timeline) -> int:
    """How far apart two stamps of the pair's two hosts may be off (µs)."""
    return tl.uncertainty_us(*tl.pair)
