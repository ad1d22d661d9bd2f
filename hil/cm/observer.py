"""Observers of a pair run: who wants to know what a run does, as it does it.

A pair run (:class:`hil.run.PairRun`) and the CM sessions it makes tell
every registered observer what happens, in this order::

    run_started(info)
      step_started(step)            # one sequence run (a named step with parameters)
        action(action)              # each controller action, once it returned
        events(batch)               # each batch of events a host's channel delivered
        timeline(timeline, complete)  # when its recording ends (complete or partial)
        verdict(timeline, verdict)  # only for a complete timeline
      step_finished(step, error)
    run_finished(info, error)

A test that records a run itself (``with cm.recording("name") as rec:``)
makes no step: its actions, events and timeline are told all the same, and
it calls the contract itself.

The Allure report is one observer, the wire judge's timeline keeper another; a lab adds its
own by registering it (``PairRun(..., observers=[...])``, or in pytest the
``pytest_hil_observers`` hook).  Subclass :class:`Observer` and override what
you need: every method is a no-op here.  A run's observers are a
:class:`hil.registry.Registry` of them by :attr:`Observer.name` (its class's
name unless it says otherwise): one run takes a name once.  An observer must not raise; a
failing one is logged and the run goes on (a report is never worth a test).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from hil.registry import Registry

if TYPE_CHECKING:
    from hil.judge.contract import Verdict
    from hil.judge.timeline import Action, Event, Timeline

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunInfo:
    """What a pair run holds once it is set up: its pair, hosts, lease and provider."""

    pair: str
    hosts: tuple[str, str]
    lease: str
    provider: str  # the driver the pair really runs ("siw" after a fallback)
    profile: str


@dataclass(frozen=True)
class StepInfo:
    """One named step of a run: a CM sequence with its direction and parameters."""

    name: str
    direction: str
    params: dict[str, Any] = field(default_factory=dict)


class Observer:
    """Base class of observers: override the events you want (see the module doc)."""

    @property
    def name(self) -> str:
        """What it is registered under among a run's observers (default: its class's name)."""
        return type(self).__name__

    def run_started(self, info: RunInfo) -> None:
        """The pair is reserved, set up, and its profile known."""

    def run_finished(self, info: RunInfo, error: BaseException | None) -> None:
        """The run is over and the pair restored (``error``: why it ended early)."""

    def step_started(self, step: StepInfo) -> None:
        """A step (a sequence run) begins."""

    def step_finished(self, step: StepInfo, error: BaseException | None) -> None:
        """A step ended; ``error`` is what it raised, None when it completed."""

    def action(self, action: Action) -> None:
        """The controller's call on a host returned (``action.result`` says how)."""

    def events(self, batch: Sequence[Event]) -> None:
        """Events one host's channel delivered, in delivery order."""

    def timeline(self, timeline: Timeline, complete: bool) -> None:
        """A step's timeline: complete, or what was recorded before the step failed."""

    def verdict(self, timeline: Timeline, verdict: Verdict) -> None:
        """The contract's verdict on a complete timeline."""


class Observers(Observer):
    """Several observers as one: each call goes to each, a failing one is logged."""

    def __init__(self, observers: Iterable[Observer] = ()) -> None:
        self._all = Registry[Observer]("run observer", name_of=lambda o: o.name, items=observers)

    def add(self, observer: Observer) -> None:
        """Register one more observer (InputError when its name is taken)."""
        self._all.register(observer)

    def remove(self, observer: Observer) -> None:
        """Stop telling ``observer`` (registered with :meth:`add`)."""
        if self._all.get(observer.name) is observer:
            self._all.unregister(observer.name)

    def __iter__(self) -> Iterator[Observer]:
        return iter(self._all)

    def _each(self, method: str, *args: Any) -> None:
        for o in self._all:
            fn = getattr(o, method, None)
            if fn is None:  # an observer of CM runs only, told of a test
                continue
            try:
                fn(*args)
            except Exception:
                log.exception("observer %s failed in %s", type(o).__name__, method)

    def run_started(self, info: RunInfo) -> None:
        self._each("run_started", info)

    def run_finished(self, info: RunInfo, error: BaseException | None) -> None:
        self._each("run_finished", info, error)

    def step_started(self, step: StepInfo) -> None:
        self._each("step_started", step)

    def step_finished(self, step: StepInfo, error: BaseException | None) -> None:
        self._each("step_finished", step, error)

    def action(self, action: Action) -> None:
        self._each("action", action)

    def events(self, batch: Sequence[Event]) -> None:
        self._each("events", batch)

    def timeline(self, timeline: Timeline, complete: bool) -> None:
        self._each("timeline", timeline, complete)

    def verdict(self, timeline: Timeline, verdict: Verdict) -> None:
        self._each("verdict", timeline, verdict)

    @contextmanager
    def step(self, step: StepInfo) -> Iterator[None]:
        """``step_started`` now, ``step_finished`` with the error (if any) at the end."""
        self.step_started(step)
        try:
            yield
        except BaseException as e:
            self.step_finished(step, e)
            raise
        self.step_finished(step, None)
