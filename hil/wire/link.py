"""Which connection on the wire is which connection of the timeline.

A connect action names its target (``dst``, ``port``); its cm_id's events
carry the 4-tuple the kernel used (``Event.local`` / ``Event.remote``) when
the agent reads it.  A wire connection is linked to a connect by that
4-tuple, or else, for a connect whose events carry none (a connect refused
before any event), by its target: the earliest wire connection to that
address and port not linked yet, in the order of their first packet.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from hil.judge.timeline import Action, Event, Timeline
from hil.wire.model import Connection, Endpoint, Exchange


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
    """``"198.18.0.1:7174"`` or ``"[fe80::1]:7174"`` as an endpoint; None for ``""``."""
    if not text:
        return None
    host, _, port = text.rpartition(":")
    return host.strip("[]"), int(port)


def _four_tuple(tl: Timeline, connect: Action) -> tuple[Endpoint, Endpoint] | None:
    for e in tl.events_for(connect.id):
        local, remote = parse_endpoint(e.local), parse_endpoint(e.remote)
        if local is not None and remote is not None and local[1] and remote[1]:
            return local, remote
    return None


def link(timelines: Sequence[Timeline], exchange: Exchange) -> list[Link]:
    """Every connect action of the timelines, linked to its wire connection if there is one."""
    taken: set[int] = set()
    found: list[Link] = []
    by_tuple = {(c.active, c.passive): i for i, c in enumerate(exchange.connections)}
    for tl in timelines:
        for connect in (a for a in tl.actions if a.name == "connect"):
            label = tl.conn_of(connect.id)
            index, how = _by_tuple(tl, connect, by_tuple)
            if index is None:
                index, how = _by_target(connect, exchange, taken)
            if index is not None:
                taken.add(index)
            wire = exchange.connections[index] if index is not None else None
            found.append(Link(tl, connect, label, wire, how))
    return found


def _by_tuple(
    tl: Timeline, connect: Action, by_tuple: dict[tuple[Endpoint, Endpoint], int]
) -> tuple[int | None, str]:
    pair = _four_tuple(tl, connect)
    if pair is None:
        return None, "no 4-tuple in the events"
    index = by_tuple.get(pair)
    return index, "4-tuple" if index is not None else "no connection with its 4-tuple"


def _by_target(connect: Action, exchange: Exchange, taken: set[int]) -> tuple[int | None, str]:
    dst, port = connect.params.get("dst"), connect.params.get("port")
    candidates = [
        (i, c)
        for i, c in enumerate(exchange.connections)
        if i not in taken and c.passive == (dst, port)
    ]
    if not candidates:
        return None, f"no connection to {dst}:{port} on the wire"
    first = min(candidates, key=lambda ic: ic[1].packets[0].wall_us if ic[1].packets else 0)
    return first[0], "target"
