"""One run of a CM sequence as data: both hosts' events and the controller's actions.

Times are microseconds.  ``t_us`` is always on the CONTROLLER's time base: a
host's raw monotonic stamp (``host_t_us``) plus that host's estimated clock
offset.  Events and actions of the same host share one offset, so comparing
them is exact; comparing across hosts is good to the hosts' measured
:class:`RelativeClock` when there is one, else to the sum of both offsets'
``uncertainty_us`` (see :meth:`Timeline.uncertainty_us`).

Everything here is JSON-safe and round-trips through :meth:`Timeline.to_json`
and :meth:`Timeline.from_json`.  Private data is kept as lowercase hex.
Events and actions are :mod:`hil.judge.records`', the clocks
:mod:`hil.judge.clocks`'; this module still names them all.

Action names the sequences use (rules in :mod:`hil.judge.contract` read them):
``listen``, ``connect``, ``accept``, ``reject``, ``disconnect``, ``qp_err``
(abortive: QP moved to ERR), ``destroy``, ``kill`` (SIGKILL of the process
holding ``id``), ``pull`` / ``restore`` (link; params ``mode`` and
``traffic``), ``traffic``, ``write`` (one RDMA WRITE; params ``how`` when
the peer must refuse it, and its completion's ``wc_status``), ``hold_egress``
(a race's egress hold: params ``address`` and ``delay_us``, see
:meth:`Timeline.holds`).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from hil.errors import InputError
from hil.judge.clocks import ClockOffset, RelativeClock, WallSample
from hil.judge.records import SIDES, Action, Event

# Events that end an active connect (invariant 1).
CONNECT_REPLIES = frozenset({"ESTABLISHED", "REJECTED", "UNREACHABLE", "CONNECT_ERROR"})
# An action: a TCP connection a test made outside the CM (params local, remote: its ends),
# malformed on purpose; the wire rules leave it alone (hil.wire.judge).
RAW_TCP = "raw_tcp"
# An action: the host of data address ``address`` held its outgoing frames back
# ``delay_us`` from here to the recording's end (tc netem; hil.cm.races.hold).
HOLD_EGRESS = "hold_egress"
# An action: the segments this side sends are clamped to params ``mss`` bytes by a middlebox
# rewriting the peer's SYN (an impairment, hil.host.impair; hil.wire.mss_rules proves it).
MSS_CLAMP = "mss_clamp"
# An action: the path drops this side's first MPA request once (an impairment,
# hil.host.impair); hil.wire.mpadrop_rules proves TCP retransmitted it.
MPA_REQUEST_DROP = "mpa_request_drop"
# An action: a tool peer (rping, ucmatose, cmtime, ib_send_bw; hil.cm.toolpeers) started on
# this side, or a kernel consumer told to connect (hil.cm.regressions.siwtx); params argv.
# Its own calls (its connects and closes) are not on the timeline.
TOOL_PEER = "tool_peer"
# An action: the pair's link began flapping (an impairment, hil.host.impair: the port down
# ``down_s`` every ``every_s``; params every_s, down_s, mode admin/carrier as a pull's).
FLAP = "flap"
# Actions that take the pair's link down: a DISCONNECTED after one needs no close to explain it.
LINK_DOWNS = frozenset({"pull", FLAP})


@dataclass(frozen=True)
class ResourceCount:
    """How many objects of a kind (cm_id, qp, cq, mr, pd, ctx, srq, or a driver's own list)
    a host held before and after."""

    host: str
    kind: str
    before: int
    after: int


@dataclass(frozen=True)
class KernelLogLine:
    """One kernel log line a host printed while the scenario ran."""

    host: str
    line: str


@dataclass(frozen=True)
class Timeline:
    """A scenario run on a pair: actions, events, clock offsets and after-run evidence."""

    scenario: str
    provider: str
    pair: tuple[str, str]
    actions: tuple[Action, ...] = ()
    events: tuple[Event, ...] = ()
    offsets: tuple[ClockOffset, ...] = ()
    resources: tuple[ResourceCount, ...] = ()
    kernel_log: tuple[KernelLogLine, ...] = ()
    # What the sequence measured: connect latency, detection time, storm rate...
    metrics: dict[str, float] = field(default_factory=dict)
    # Host-to-host clocks the offsets were derived through (cross-host orders).
    clocks: tuple[RelativeClock, ...] = ()

    def sorted(self) -> Timeline:
        """The same timeline with events and actions in controller-time order.

        Ties keep each channel's delivery order (``seq``).
        """
        events = sorted(self.events, key=lambda e: (e.t_us, e.host, e.seq))
        actions = sorted(self.actions, key=lambda a: a.t_us)
        return replace(
            self, actions=tuple(actions), events=tuple(events), metrics=dict(self.metrics)
        )

    def merged(self) -> list[Event | Action]:
        """Events and actions interleaved in controller-time order (for display)."""
        items: list[Event | Action] = [*self.events, *self.actions]
        return sorted(items, key=lambda x: (x.t_us, isinstance(x, Event)))

    def events_for(self, cm_id: str | None) -> list[Event]:
        """The events of one cm_id in delivery order (none for ``None``)."""
        picked = (e for e in self.events if cm_id is not None and e.id == cm_id)
        return sorted(picked, key=lambda e: (e.seq, e.t_us))

    def events_of_conn(self, conn: str, side: str | None = None) -> list[Event]:
        """The events of one logical connection (optionally one side) in time order."""
        picked = (e for e in self.events if e.conn == conn and (side is None or e.side == side))
        return sorted(picked, key=lambda e: (e.t_us, e.seq))

    def actions_for(self, cm_id: str | None, name: str | None = None) -> list[Action]:
        """The actions on one cm_id (optionally of one name) in time order (none for ``None``)."""
        picked = (
            a
            for a in self.actions
            if cm_id is not None and a.id == cm_id and (name is None or a.name == name)
        )
        return sorted(picked, key=lambda a: a.t_us)

    def conn_of(self, cm_id: str | None) -> str | None:
        """The connection label of a cm_id, from the first of its events that has one."""
        return next((e.conn for e in self.events_for(cm_id) if e.conn), None)

    def uncertainty_us(self, *hosts: str) -> int:
        """How far comparing times of these hosts may be off (0 for unknown hosts).

        One host: its offset's uncertainty against the controller.  Two hosts
        whose offsets agree with a measured :class:`RelativeClock`: that
        clock's uncertainty (their order needs nothing else).  Otherwise the
        sum of the hosts' offset uncertainties.
        """
        by_host = {o.host: o for o in self.offsets}
        distinct = set(hosts)
        if len(distinct) == 2:
            for rc in self.clocks:
                a, b = by_host.get(rc.host_a), by_host.get(rc.host_b)
                if {rc.host_a, rc.host_b} == distinct and a and b and rc.agrees(a, b):
                    return rc.uncertainty_us
        return sum(by_host[h].uncertainty_us for h in distinct if h in by_host)

    def holds(self) -> dict[str, int]:
        """How long each host that held its frames back in this run held them (µs, by its
        data address; :data:`HOLD_EGRESS`): a capture sees them that much after the host
        sent them."""
        held: dict[str, int] = {}
        for a in self.actions:
            if a.name == HOLD_EGRESS:
                address = str(a.params["address"])
                held[address] = max(held.get(address, 0), int(a.params["delay_us"]))
        return held

    def to_dict(self) -> dict[str, Any]:
        """A JSON-safe dict."""
        return asdict(self)

    def to_json(self, indent: int | None = None) -> str:
        """The timeline as JSON text."""
        return json.dumps(self.to_dict(), indent=indent, sort_keys=True)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Timeline:
        """Rebuild a timeline from :meth:`to_dict` output."""
        try:
            return cls(
                scenario=data["scenario"],
                provider=data["provider"],
                pair=(data["pair"][0], data["pair"][1]),
                actions=tuple(Action(**a) for a in data.get("actions", ())),
                events=tuple(Event(**e) for e in data.get("events", ())),
                offsets=tuple(ClockOffset(**o) for o in data.get("offsets", ())),
                resources=tuple(ResourceCount(**r) for r in data.get("resources", ())),
                kernel_log=tuple(KernelLogLine(**k) for k in data.get("kernel_log", ())),
                metrics=dict(data.get("metrics", {})),
                clocks=tuple(RelativeClock(**c) for c in data.get("clocks", ())),
            )
        except (KeyError, TypeError, IndexError, ValueError) as exc:
            raise InputError(f"not a timeline: {type(exc).__name__}: {exc}") from exc

    @classmethod
    def from_json(cls, text: str) -> Timeline:
        """Rebuild a timeline from :meth:`to_json` output."""
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise InputError(f"not a timeline: invalid JSON: {exc}") from exc
        if not isinstance(data, dict):
            raise InputError("not a timeline: the JSON is not an object")
        return cls.from_dict(data)


def render(tl: Timeline) -> str:
    """The timeline's actions and events in time order, one a line (for messages)."""
    return "\n".join(f"  {item.brief()}" for item in tl.sorted().merged())


def explain(tl: Timeline, what: str) -> str:
    """A failure message: what was expected, then the whole timeline."""
    return f"{what}\nscenario {tl.scenario} on {tl.pair[0]} <-> {tl.pair[1]}:\n{render(tl)}"


__all__ = [
    "Action",
    "CONNECT_REPLIES",
    "ClockOffset",
    "Event",
    "KernelLogLine",
    "HOLD_EGRESS",
    "MSS_CLAMP",
    "MPA_REQUEST_DROP",
    "RAW_TCP",
    "TOOL_PEER",
    "RelativeClock",
    "ResourceCount",
    "SIDES",
    "Timeline",
    "WallSample",
    "explain",
    "render",
]
