"""What a wire rule is: a named check of one test's exchange against its timelines.

A wire rule returns an :class:`Outcome`: ``fail`` with findings, ``pass``
when it judged something and found it right, ``n/a`` when the test held
nothing it judges (no reject, no link pull), and ``skip`` when it could not
judge (no usable capture point, packets not placed on the timeline); the
reason always says which.  Never a pass for a scenario that did not happen.

A rule reads what a host puts on the wire from that host's profile
(:meth:`WireCase.expects`): an MPA frame, a reject's teardown or a TERMINATE
by the expectations of the host that sent it, an abortive close by those of
the host that closed.  When the sender is not known (a bare capture judged
with each host's own profile) every host's expectations are offered and a
frame one of them allows passes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Literal

from hil.judge.profiles import Profile, Profiles, WireExpect
from hil.judge.timeline import SIDES, Action, Timeline
from hil.wire.link import Link
from hil.wire.model import Connection, Exchange, Packet, Role

Status = Literal["pass", "fail", "skip", "n/a"]


@dataclass(frozen=True)
class WireFinding:
    """One thing a rule found wrong: what, on which connection, and the packets."""

    message: str
    connection: str | None = None
    packets: tuple[str, ...] = ()  # Packet.brief() of the evidence

    def to_text(self) -> str:
        """The finding and its packets, one a line."""
        where = f" [{self.connection}]" if self.connection else ""
        return "\n".join([f"{self.message}{where}", *(f"    packet {p}" for p in self.packets)])


@dataclass(frozen=True)
class Outcome:
    """A rule's result on one test."""

    status: Status
    reason: str = ""
    findings: tuple[WireFinding, ...] = ()


@dataclass(frozen=True)
class WireCase:
    """What a wire rule judges: the decoded exchange, the timelines and their links."""

    exchange: Exchange
    timelines: tuple[Timeline, ...]
    links: tuple[Link, ...]
    profile: Profiles

    @property
    def placed(self) -> bool:
        """True when the packets carry timeline times (``Packet.t_us``)."""
        return bool(self.exchange.uncertainty_us)

    def slack_us(self, packet: Packet, host: str) -> int:
        """How far apart a packet and an event of ``host`` may look in time and still be in
        order: the packet's placement uncertainty plus the host's clock offset's, plus the
        egress hold of the packet's sender, if it held its frames back (a capture sees them
        only once the hold let them go: :meth:`hil.judge.timeline.Timeline.holds`)."""
        tl_unc = max((tl.uncertainty_us(host) for tl in self.timelines), default=0)
        held = self._holds.get(packet.src[0], 0)
        return self.exchange.uncertainty_us.get(packet.point, 0) + tl_unc + held

    @cached_property
    def _holds(self) -> dict[str, int]:
        # Read once per case: slack_us runs for every packet a rule places.
        held: dict[str, int] = {}
        for tl in self.timelines:
            for address, us in tl.holds().items():
                held[address] = max(held.get(address, 0), us)
        return held

    def host_of(self, conn: Connection, role: Role) -> str | None:
        """The host on ``role``'s end of ``conn``, when a timeline's connect is linked to it."""
        lk = next((lk for lk in self.links if lk.wire is conn), None)
        return None if lk is None else link_host(lk, role)

    def expects(self, host: str | None) -> tuple[WireExpect, ...]:
        """What ``host`` puts on the wire; each host's (once each) when ``host`` is None."""
        if isinstance(self.profile, Profile):
            return (self.profile.wire,)
        if host is not None:
            return (self.profile.of(host).wire,)
        return tuple(dict.fromkeys(p.wire for _, p in self.profile.by_host))


def link_host(lk: Link, role: Role) -> str:
    """The host on ``role``'s end of a linked connect (the active end connected)."""
    active = SIDES.index(lk.active_side)
    return lk.timeline.pair[active if role == "active" else 1 - active]


Check = Callable[[WireCase], Outcome]


@dataclass(frozen=True)
class WireRule:
    """One wire rule: its name, what it states, and what it needs to be judged."""

    name: str
    statement: str
    check: Check = field(repr=False, compare=False)
    needs_timeline: bool = True
    needs_clock: bool = False


def judged(findings: Sequence[WireFinding], count: int, nothing: str) -> Outcome:
    """``fail`` with the findings, ``pass`` when ``count`` cases were judged, else ``n/a``."""
    if findings:
        return Outcome("fail", f"{len(findings)} of {count} broken", tuple(findings))
    if count:
        return Outcome("pass", f"{count} judged")
    return Outcome("n/a", nothing)


# What an impairment's rule says when the wire does not show the impairment took.
NOT_EFFECTIVE = "impairment not effective"


def judged_by_action(
    case: WireCase,
    action: str,
    judge: Callable[[Link, Action], list[WireFinding]],
    nothing: str,
) -> Outcome:
    """Each connection linked to a timeline that records ``action`` (an impairment's:
    ``mss_clamp``, ``mpa_request_drop``), judged by ``judge`` with that action."""
    findings: list[WireFinding] = []
    count = 0
    for tl in case.timelines:
        found = next((a for a in tl.actions if a.name == action), None)
        if found is None:
            continue
        for lk in (lk for lk in case.links if lk.timeline is tl):
            count += 1
            findings += judge(lk, found)
    return judged(findings, count, nothing)


def evidence(*packets: Packet | None) -> tuple[str, ...]:
    """The briefs of the packets given (None skipped)."""
    return tuple(p.brief() for p in packets if p is not None)


def missing(lk: Link, what: str) -> WireFinding:
    """A finding that the linked connect ``lk`` lacks ``what`` on the wire."""
    return WireFinding(f"{lk.connect.brief()}: {what} ({lk.how})", lk.conn)
