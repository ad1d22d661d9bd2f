"""What the runner's parts need of each other, so that each imports only what is below it.

The runner is layered, lowest first::

    clock, observer, interfaces -> endpoint -> recording -> steps, sides
    -> registry, sequences -> session

An endpoint records into a :class:`Recorder` (a
:class:`~hil.cm.recording.Recording` is one); a recording and the steps run
on a :class:`PairView` (a :class:`~hil.cm.sides.PairSides`, hence a
:class:`~hil.cm.session.CMSession`, is one).  Neither needs to import the
class that implements it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from hil.agent import Agent
    from hil.cm.observer import Observer
    from hil.judge.profiles import Profiles
    from hil.judge.timeline import Action, ClockOffset, Event, RelativeClock


class Recorder(Protocol):
    """Where an endpoint puts what it did and what its channel delivered."""

    def add_action(self, action: Action) -> None:
        """Record one action (the observers hear of it)."""

    def add_events(self, batch: Sequence[Event]) -> None:
        """Record one batch of events a channel delivered (the observers hear of it)."""

    def events(self) -> list[Event]:
        """Every event recorded so far, in controller-time order."""

    @property
    def session(self) -> PairView:
        """The pair the recording runs on (its profiles bound the steps' waits)."""


class PairView(Protocol):
    """The two sides of a set-up pair, as a recording and the steps use them."""

    @property
    def active(self) -> str:
        """The side that connects ("a" or "b")."""

    @property
    def passive(self) -> str:
        """The side that listens."""

    @property
    def profile(self) -> Profiles:
        """The contract profiles of the providers the pair runs (``of(host)``: a host's)."""

    @property
    def observers(self) -> Observer:
        """Who hears of every action, event batch and timeline."""

    def host(self, side: str) -> str:
        """The inventory name of the host on ``side``."""

    def agent(self, side: str) -> Agent:
        """The agent of the host on ``side``."""

    def address(self, side: str) -> str:
        """The data IP address of the port on ``side``."""

    def offset(self, side: str) -> ClockOffset:
        """The clock offset of the host on ``side``."""

    def clocks(self) -> tuple[RelativeClock, ...]:
        """The host-to-host clock the offsets were derived through (if measured)."""

    def refresh_offsets(self, rounds: int = ..., probes: int = ...) -> None:
        """Measure both hosts' clocks again (SSH round trips, probes host to host)."""

    def port(self) -> int:
        """A CM port not used before."""

    def standing_holds(self) -> dict[str, int]:
        """Side -> µs its frames are held back for every run now (an impairment's delay)."""

    def standing_clamps(self) -> dict[str, int]:
        """Side -> the MSS its segments are clamped to for every run now (an impairment)."""

    def standing_drops(self) -> tuple[str, ...]:
        """The sides whose first MPA request the path drops for every run now."""
