"""Both ends of a set-up pair as the CM sequences use them: sides, addresses, ports, clocks.

:class:`PairSides` is what a sequence runs on; :class:`hil.cm.session.CMSession`
is a PairSides that also runs sequences by name.  See :mod:`hil.cm.session`
for the API.
"""

from __future__ import annotations

import itertools
import logging
import random
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import TYPE_CHECKING

from hil.cm import clock
from hil.cm.observer import Observers
from hil.cm.recording import Recording
from hil.errors import InputError, RemoteError
from hil.judge.timeline import SIDES, ClockOffset, RelativeClock

if TYPE_CHECKING:
    from hil.agent import Agent
    from hil.cm.endpointpool import EndpointPool
    from hil.host.hosts import Hosts
    from hil.host.impair import Direction, ImpairControl
    from hil.host.impairkinds import Impairment, Probe
    from hil.host.journal import Journal
    from hil.host.linkctl import LinkControl
    from hil.inventory.model import Family, Pair, Rnic
    from hil.judge.profiles import Profiles

log = logging.getLogger(__name__)

DIRECTIONS = ("a-b", "b-a")
PORT_RANGE = (20000, 30000)  # a fresh CM port per use, so no run meets another's leftovers


class PairSides:
    """Both ends of a set-up pair, as CM sequences use them (see :mod:`hil.cm.session`)."""

    def __init__(
        self,
        hosts: Hosts,
        pair: Pair,
        *,
        profile: Profiles,
        direction: str = "a-b",
        journal: Journal | None = None,
        evidence: bool = True,
        observers: Observers | None = None,
        family: Family | None = None,
        pool: EndpointPool | None = None,
    ) -> None:
        if direction not in DIRECTIONS:
            raise InputError(f"direction must be one of {', '.join(DIRECTIONS)}, not {direction!r}")
        self.family = _family(pair, family)
        self.hosts = hosts
        self.pair = pair
        self.direction = direction
        self.active, self.passive = direction.split("-")
        self.journal = journal
        self.evidence = evidence
        self.observers = observers if observers is not None else Observers()
        self.pool = pool  # the recordings' idle endpoints (hil.cm.endpointpool), if kept
        self._offsets: dict[str, ClockOffset] = {}
        self._relative: RelativeClock | None = None
        self._ports = itertools.count(random.randint(*PORT_RANGE))
        self._holds: dict[str, int] = {}
        self._clamps: dict[str, int] = {}
        self._drops: set[str] = set()
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
        """The data IP address of the session's family of the port on ``side``."""
        address = self.rnic(side).address_of(self.family)
        assert address is not None  # checked in __init__ (_family)
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
        """The clock offset of the host on ``side`` (both measured on first use, see
        :meth:`refresh_offsets`)."""
        side = _side(side)
        if side not in self._offsets:
            self.refresh_offsets()
        return self._offsets[side]

    def clocks(self) -> tuple[RelativeClock, ...]:
        """The host-to-host clock B's offset was derived through (none when the probes
        over the data link failed and each host was measured over SSH)."""
        return (self._relative,) if self._relative is not None else ()

    def refresh_offsets(
        self, rounds: int = clock.DEFAULT_ROUNDS, probes: int = clock.DEFAULT_PROBES
    ) -> None:
        """Measure both hosts' clocks again (guest clocks drift under TCG).

        Host A's offset to the controller comes from ``rounds`` round trips
        over SSH (milliseconds on TCG); host B's clock against A's from up to
        ``probes`` probes over the pair's data link (``hil.cm.clock.relative``:
        hundreds of µs on TCG, each probe bounds it, more give a tighter
        bound), and B's offset is A's through it, so an order across the two
        hosts is as certain as that relative clock.  When the probes fail
        (the link is down, UDP is filtered) B is measured over SSH too.  The
        probes run while A's round trips do: a recording pays the longer.
        """
        self._offsets.clear()
        self._relative = None
        with ThreadPoolExecutor(1, thread_name_prefix="clock-probe") as pool:
            probed = pool.submit(self._probe, probes)
            a = clock.estimate(self.host("a"), clock.agent_now(self.agent("a")), rounds)
        self._offsets["a"] = a
        try:
            self._relative = probed.result()
        except (RemoteError, InputError) as e:
            log.warning("host-to-host clock of pair %s unavailable: %s", self.pair.name, e)
            agent = self.agent("b")
            self._offsets["b"] = clock.estimate(self.host("b"), clock.agent_now(agent), rounds)
        else:
            self._offsets["b"] = clock.through(a, self._relative)
        log.info("clocks %s %s %s", a, self._offsets["b"], self._relative)

    def _probe(self, count: int) -> RelativeClock:
        a, b = (clock.Peer(self.host(s), self.agent(s), self.address(s)) for s in SIDES)
        return clock.relative(a.host, b.host, clock.probe_samples(a, b, self.port(), count))

    # -- link pulls ----------------------------------------------------------

    def pull_modes(self) -> list[str]:
        """The pull modes the pair's link offers, in inventory order."""
        return [p.mode for p in self.pair.link.pulls]

    def link_control(self) -> LinkControl:
        """Link pulls on this pair's hosts, journaled (needs the session's journal)."""
        if self.journal is None:
            raise InputError("link pulls need a restore journal: pass journal= to CMSession")
        from hil.host.linkctl import LinkControl

        return LinkControl(self.hosts, self.journal)

    def impair_control(self) -> ImpairControl:
        """Impairments of this pair's path, journaled (needs the session's journal)."""
        if self.journal is None:
            raise InputError("impairments need a restore journal: pass journal= to CMSession")
        from hil.host.impair import ImpairControl

        return ImpairControl(self.hosts, self.journal)

    def way_from(self, side: str) -> Direction:
        """The direction of the pair's link ("a>b" or "b>a") whose frames ``side`` sends."""
        return "a>b" if self.host(side) == self.pair.link.a.host else "b>a"

    @contextmanager
    def impaired(self, way: Direction, impairments: Sequence[Impairment]) -> Iterator[list[Probe]]:
        """Impair direction ``way`` ("a>b" or "b>a") of the pair's link inside the block
        (:meth:`hil.host.impair.ImpairControl.impaired`: proven, then undone however the
        block ends); yields the proving probes.  A delay (delay, reorder) holds the
        sender's frames back, and loss shows a lost frame only in TCP's resend
        (:func:`hil.host.impair.wire_hold_ms`): every run inside records it as that side's
        hold, so the wire rules expect its frames on the wire that much later.  An MSS clamp is
        recorded as the sender's ``mss_clamp``, which the wire rule
        ``segments-within-the-clamped-mss`` proves; a drop of the MPA request as the
        sender's ``mpa_request_drop``, which ``mpa-request-retransmitted`` proves."""
        link = self.pair.link
        side = next((s for s in SIDES if self.way_from(s) == way), None)
        from hil.host.impair import wire_hold_ms
        from hil.host.impairkinds import DROP_MPA_REQUEST

        delay_us = int(wire_hold_ms(impairments) * 1000)
        mss = next((i.mss for i in impairments if i.kind == "mss"), 0)
        drops = any(i.kind == DROP_MPA_REQUEST for i in impairments)
        with self.impair_control().impaired(link, way, impairments) as probes:
            if side is None:
                yield probes
                return
            try:
                if mss:
                    self._clamps[_side(side)] = mss
                if drops:
                    self._drops.add(_side(side))
                if not delay_us:
                    yield probes
                    return
                with self.holding(side, delay_us):
                    yield probes
            finally:
                self._clamps.pop(_side(side), None)
                self._drops.discard(_side(side))

    @contextmanager
    def holding(self, side: str, delay_us: int) -> Iterator[None]:
        """Inside the block, ``side``'s frames are held back up to ``delay_us`` by
        something outside the runs (an impairment): each run records it as an action
        ``hold_egress`` of that side at its start (:meth:`standing_holds`)."""
        self._holds[_side(side)] = delay_us
        try:
            yield
        finally:
            self._holds.pop(_side(side), None)

    def standing_holds(self) -> dict[str, int]:
        """The holds in force for every run now: side -> µs (:meth:`holding`)."""
        return dict(self._holds)

    def standing_clamps(self) -> dict[str, int]:
        """The MSS clamps in force for every run now: side -> the MSS its segments are
        clamped to (:meth:`impaired`)."""
        return dict(self._clamps)

    def standing_drops(self) -> tuple[str, ...]:
        """The sides whose first MPA request the path drops for every run now
        (:meth:`impaired`)."""
        return tuple(sorted(self._drops))

    # -- recording -----------------------------------------------------------

    def recording(self, scenario: str, pool: EndpointPool | None = None) -> Recording:
        """A new recording for one run (a context manager); its endpoints come from and go
        back to ``pool``, by default the session's."""
        return Recording(self, scenario, evidence=self.evidence, pool=pool or self.pool)


def _family(pair: Pair, family: Family | None) -> Family:
    """``family`` when both ports have an address of it; None: the first the pair offers.

    InputError naming what each port has otherwise.
    """
    offered = pair.families
    if family is None and offered:
        return offered[0]
    if family is not None and family in offered:
        return family
    have = "; ".join(
        f"port {r.name} of {h.name}: {', '.join(r.families) or 'none'}"
        for h, r in ((pair.host_a, pair.rnic_a), (pair.host_b, pair.rnic_b))
    )
    raise InputError(
        f"pair {pair.name}: CM sequences need an {family or 'IP'} address on both ports "
        f"(address, or address6 for IPv6), and the inventory gives {have}"
    )


def _side(side: str) -> str:
    if side not in SIDES:
        raise InputError(f"side must be one of {SIDES}, not {side!r}")
    return side
