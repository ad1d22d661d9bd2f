"""Which connection on the wire is which connection of the timeline.

A connect action names its target (``dst``, ``port``); its cm_id's events
carry the 4-tuple the kernel used (``Event.local`` / ``Event.remote``) when
the agent reads it.  A wire connection is linked to a connect by that
4-tuple, or else, for a connect whose events carry none (a connect refused
before any event), by its target: the earliest wire connection to that
address and port not linked yet, in the order of their first packet.

One 4-tuple may carry several connections in one test (the kernel gave a
later connect the source port of an earlier, closed one: two rounds of a
race sweep did); :mod:`hil.wire.decode` splits them at each new SYN.  Each
connect takes the earliest such connection not linked yet that began no
earlier than the connect did (less the clocks' uncertainty), connects taken
in time order: a round is linked to the connection of its own time.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from hil.judge.records import split_endpoint
from hil.judge.timeline import SIDES, Action, Event, Timeline
from hil.wire.model import Connection, Endpoint, Exchange, canonical


@dataclass(frozen=True)
class Link:
    """One connect of a timeline and what the wire shows of it (``wire`` None: nothing)."""

    timeline: Timeline
    connect: Action
    conn: str | None  # the timeline's connection label ("c1"), when the sequence set one
    wire: Connection | None
    how: str  # "4-tuple", "target", or why nothing matched

    def events(self, side: str | None = None) -> list[Event]:
        """This connection's events on both sides (or one ``side``), in time order."""
        if self.conn is not None:
            return self.timeline.events_of_conn(self.conn, side)
        own = self.timeline.events_for(self.connect.id)
        return [e for e in own if side is None or e.side == side]

    def actions(self, *names: str) -> list[Action]:
        """The actions on this connection's cm_ids (both sides), in time order."""
        ids = {self.connect.id, *(e.id for e in self.events())}
        picked = [a for a in self.timeline.actions if a.id in ids and a is not self.connect]
        return sorted((a for a in picked if not names or a.name in names), key=lambda a: a.t_us)

    @property
    def active_side(self) -> str:
        """The side (``a``/``b``) that connected."""
        return self.connect.side


def parse_endpoint(text: str) -> Endpoint | None:
    """``"198.18.0.1:7174"``, ``"[fe80::1]:7174"`` or ``"fe80::1:7174"`` (the last colon
    begins the port) as an endpoint in :func:`~hil.wire.model.canonical` form; None for
    ``""`` or text that names no port."""
    ep = split_endpoint(text)
    return None if ep is None else canonical(ep)


def _four_tuple(tl: Timeline, connect: Action) -> tuple[Endpoint, Endpoint] | None:
    for e in tl.events_for(connect.id):
        local, remote = parse_endpoint(e.local), parse_endpoint(e.remote)
        if local is not None and remote is not None and local[1] and remote[1]:
            return local, remote
    return None


def link(timelines: Sequence[Timeline], exchange: Exchange) -> list[Link]:
    """Every connect action of the timelines, linked to its wire connection if there is one.

    Connects are linked in time order, by the 4-tuple their events carry first (the
    stronger evidence), then the rest by their target, each to a wire connection no
    other connect took.
    """
    connects = [(tl, a) for tl in timelines for a in tl.actions if a.name == "connect"]
    by_time = sorted(range(len(connects)), key=lambda i: connects[i][1].t_us)
    wire = _Wire(exchange)
    chosen: dict[int, tuple[int | None, str]] = {}
    for i in by_time:
        pair = _four_tuple(*connects[i])
        got = wire.pick(*connects[i], pair) if pair is not None else (None, "")
        if got[0] is not None:
            chosen[i] = got
    for i in (i for i in by_time if i not in chosen):
        chosen[i] = wire.pick(*connects[i], None)
    found = []
    for i, (tl, connect) in enumerate(connects):
        index, how = chosen[i]
        conn = exchange.connections[index] if index is not None else None
        found.append(Link(tl, connect, tl.conn_of(connect.id), conn, how))
    return found


def connect_target(action: Action) -> Endpoint | None:
    """The passive end a ``connect`` action dialled, as the exchange writes one; None for
    another action or one without a port."""
    dst, port = action.params.get("dst"), action.params.get("port")
    if action.name != "connect" or not isinstance(port, int):
        return None
    return canonical((str(dst), port))


class _Wire:
    """The exchange's connections by 4-tuple and by passive end, and those linked so far."""

    def __init__(self, exchange: Exchange) -> None:
        self.exchange = exchange
        self.taken: set[int] = set()
        self.by_tuple: dict[tuple[Endpoint, Endpoint], list[int]] = {}
        self.by_target: dict[Endpoint, list[int]] = {}
        for i, c in enumerate(exchange.connections):
            active, passive = canonical(c.active), canonical(c.passive)
            self.by_tuple.setdefault((active, passive), []).append(i)
            self.by_target.setdefault(passive, []).append(i)

    def pick(
        self, tl: Timeline, connect: Action, pair: tuple[Endpoint, Endpoint] | None
    ) -> tuple[int | None, str]:
        """``connect``'s wire connection (its index; how it was found, or why none was):
        one of 4-tuple ``pair``, or with None one to the connect's target."""
        if pair is None:
            target = connect_target(connect)
            matching = self.by_target.get(target, []) if target else []
            dst, port = connect.params.get("dst"), connect.params.get("port")
            how, none = "target", f"no connection to {dst}:{port} on the wire"
        else:
            matching = self.by_tuple.get(pair, [])
            how, none = "4-tuple", "no connection with its 4-tuple"
        free = [i for i in matching if i not in self.taken]
        index = self._earliest_in_time(tl, connect, free)
        if index is None:
            return None, f"{none} from its time on that no other connect took" if matching else none
        self.taken.add(index)
        return index, how

    def _earliest_in_time(self, tl: Timeline, connect: Action, candidates: list[int]) -> int | None:
        """The earliest of ``candidates`` that began no earlier than ``connect`` did, less
        the clocks' uncertainty, so that a round never takes an earlier round's connection
        on the same 4-tuple.  A connection with no placed packet is in time."""
        slack = tl.uncertainty_us(tl.pair[SIDES.index(connect.side)])
        conns = self.exchange.connections

        def in_time(i: int) -> bool:
            began = self.exchange.began(conns[i])
            return began is None or began[0] >= connect.t_us - began[1] - slack

        def first_seen(i: int) -> int:
            return min((p.wall_us for p in conns[i].packets), default=0)

        return min(filter(in_time, candidates), key=first_seen, default=None)
