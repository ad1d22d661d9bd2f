"""CMSession: run RDMA CM sequences on a set-up pair and get timelines back.

API (for suites and the CLI)::

    from hil.cm.session import CMSession
    from hil.judge.contract import check

    session = pair_run.session("a-b")       # hil.run.PairRun: the usual way to get one
    timeline = session.run("reject", private_data=b"no thanks")
    verdict = check(timeline, session.profile)

- ``CMSession(hosts, pair, *, profile, direction="a-b", journal=None,
  evidence=True, observers=None)``: ``hosts`` is a :class:`hil.hosts.Hosts`
  (one agent per host), ``pair`` the reserved
  :class:`~hil.inventory.model.Pair`, already set up
  (:func:`hil.pairsetup.setup_pair`).  ``profile`` is the contract profile of
  the provider the pair really runs (:mod:`hil.run.provider` reads it).
  ``direction`` says which side connects ("a-b": host A is active).
  ``journal`` is needed only for link pulls.  ``evidence`` takes resource
  counts and the kernel log around every run (invariant 11).  ``observers``
  (:class:`hil.cm.observer.Observers`) hear of every run, action, event
  batch, timeline and verdict.
- ``session.run(name, **params) -> Timeline``: one sequence of
  :data:`hil.cm.sequences.SEQUENCES` (names and parameters are listed there).
- ``session.active`` / ``session.passive``: sides ("a"/"b") for the direction;
  ``session.host(side)``, ``session.agent(side)``, ``session.address(side)``
  (the port's data IP), ``session.offset(side)`` (the host's
  :class:`~hil.judge.timeline.ClockOffset`, measured once, refreshed by
  :meth:`refresh_offsets`), ``session.port()`` (a fresh TCP port per use),
  ``session.pull_modes()`` (the modes the pair's link offers),
  ``session.link_control()`` (:class:`hil.linkctl.LinkControl`).
- ``session.recording(scenario)``: a :class:`~hil.cm.recording.Recording`
  context for writing a new sequence from the steps in :mod:`hil.cm.steps`.

Every timeline is on the controller's CLOCK_MONOTONIC (µs); each host's
events are moved onto it by that host's offset, known to +/- its
``uncertainty_us`` (half the tightest ``cm_now`` round trip).
"""

from __future__ import annotations

import itertools
import logging
import random
from typing import TYPE_CHECKING, Any

from hil.cm import clock
from hil.cm.observer import Observers, StepInfo
from hil.cm.recording import Recording
from hil.errors import InputError
from hil.judge.timeline import SIDES, ClockOffset, Timeline

if TYPE_CHECKING:
    from hil.agent import Agent
    from hil.hosts import Hosts
    from hil.inventory.model import Pair, Rnic
    from hil.journal import Journal
    from hil.judge.profiles import Profile
    from hil.linkctl import LinkControl

log = logging.getLogger(__name__)

DIRECTIONS = ("a-b", "b-a")
PORT_RANGE = (20000, 30000)  # a fresh CM port per use, so no run meets another's leftovers


class CMSession:
    """Both ends of a set-up pair, ready to run CM sequences (see the module doc)."""

    def __init__(self, hosts: Hosts, pair: Pair, *, profile: Profile, direction: str = "a-b",
                 journal: Journal | None = None, evidence: bool = True,
                 observers: Observers | None = None) -> None:
        if direction not in DIRECTIONS:
            raise InputError(f"direction must be one of {', '.join(DIRECTIONS)}, "
                             f"not {direction!r}")
        self.hosts = hosts
        self.pair = pair
        self.direction = direction
        self.active, self.passive = direction.split("-")
        self.journal = journal
        self.evidence = evidence
        self.observers = observers if observers is not None else Observers()
        self._offsets: dict[str, ClockOffset] = {}
        self._ports = itertools.count(random.randint(*PORT_RANGE))
        for side in SIDES:
            if self.rnic(side).address is None:
                raise InputError(f"pair {pair.name}: port {self.rnic(side).name} of "
                                 f"{self.host(side)} has no address in the inventory; "
                                 "CM sequences need the data addresses")
        self.profile = profile

    # -- the pair ------------------------------------------------------------

    def rnic(self, side: str) -> Rnic:
        """The pair's port on ``side``."""
        return self.pair.rnic_a if _side(side) == "a" else self.pair.rnic_b

    def host(self, side: str) -> str:
        """The inventory name of the host on ``side``."""
        return (self.pair.host_a if _side(side) == "a" else self.pair.host_b).name

    def agent(self, side: str) -> Agent:
        """The agent of the host on ``side``."""
        return self.hosts.agent(self.host(side))

    def address(self, side: str) -> str:
        """The data IP address of the port on ``side``."""
        address = self.rnic(side).address
        assert address is not None  # checked in __init__
        return str(address.ip)

    def other(self, side: str) -> str:
        """The other side."""
        return "b" if _side(side) == "a" else "a"

    def side_of(self, host: str) -> str:
        """The side of an inventory host of the pair."""
        for side in SIDES:
            if self.host(side) == host:
                return side
        raise InputError(f"host {host} is not in pair {self.pair.name}")

    def port(self) -> int:
        """A CM port not used before in this session."""
        port = next(self._ports)
        if port >= 65000:
            self._ports = itertools.count(PORT_RANGE[0])
        return port

    # -- clocks --------------------------------------------------------------

    def offset(self, side: str) -> ClockOffset:
        """The clock offset of the host on ``side`` (measured on first use)."""
        side = _side(side)
        if side not in self._offsets:
            agent = self.agent(side)
            self._offsets[side] = clock.estimate(self.host(side), clock.agent_now(agent))
            log.info("clock offset %s", self._offsets[side])
        return self._offsets[side]

    def refresh_offsets(self) -> None:
        """Measure both hosts' clock offsets again (guest clocks drift under TCG)."""
        self._offsets.clear()
        for side in SIDES:
            self.offset(side)

    # -- link pulls ----------------------------------------------------------

    def pull_modes(self) -> list[str]:
        """The pull modes the pair's link offers, in inventory order."""
        return [p.mode for p in self.pair.link.pulls]

    def link_control(self) -> LinkControl:
        """Link pulls on this pair's hosts, journaled (needs the session's journal)."""
        if self.journal is None:
            raise InputError("link pulls need a restore journal: pass journal= to CMSession")
        from hil.linkctl import LinkControl

        return LinkControl(self.hosts, self.journal)

    # -- running -------------------------------------------------------------

    def recording(self, scenario: str) -> Recording:
        """A new recording for one run (a context manager)."""
        return Recording(self, scenario, evidence=self.evidence)

    def run(self, name: str, **params: Any) -> Timeline:
        """Run sequence ``name`` of :data:`hil.cm.sequences.SEQUENCES` with ``params``."""
        from hil.cm.sequences import SEQUENCES
        from hil.judge.contract import check

        seq = SEQUENCES.get(name)
        if seq is None:
            raise InputError(f"no CM sequence {name!r} (known: {', '.join(sorted(SEQUENCES))})")
        with self.observers.step(StepInfo(name, self.direction, dict(params))):
            timeline = seq(self, **params)
            self.observers.timeline(timeline, True)
            self.observers.verdict(timeline, check(timeline, self.profile))
            return timeline


def _side(side: str) -> str:
    if side not in SIDES:
        raise InputError(f"side must be one of {SIDES}, not {side!r}")
    return side
