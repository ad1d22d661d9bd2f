"""What the timeline picture's wire lane shows: the packets that matter, as crossings.

A crossing is one packet that matters to the CM (SYN, SYN-ACK, MPA request
and reply, FIN, RST, TERMINATE: :func:`hil.wire.render.what_matters`) going
from its sender's side of the pair to the other: it leaves at the time the
sender's capture point saw it and arrives at the time the receiver's saw it
(both ends capture, so the slant is the time on the wire plus the placement
uncertainty); a packet that only one point saw crosses at that one time.
Retransmissions of other segments are marks on their sender's edge.  Only
packets placed on the timeline (``Packet.t_us``) are shown; the notes say
how many were left out and how well each capture point is placed.

Which side a packet's address is: the timeline carries no addresses, so
they come from what links it to the wire (:func:`hil.wire.link.link`): a
linked connection's active address is its connect action's side, its
passive address the other side; a connect's ``dst`` parameter is the
passive side's address, and an event's ``local`` endpoint is its own side's.
A connection whose addresses stay unknown is left out (and counted).

Shown are the connections linked to the timeline's connects, and other
connections between its two addresses whose packets fall within its span (a
test that ran several sequences captured all of them in one exchange).  At
most ``MAX_ARROWS`` crossings are drawn: cited and red ones first, then
whole connections in the order they began; the notes count the rest by kind.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from hil.judge.timeline import Timeline
from hil.wire.link import Link, link, parse_endpoint
from hil.wire.model import Connection, Exchange, Packet
from hil.wire.render import Tone, plain_label, segments, what_matters

MAX_ARROWS = 80
MAX_MARKS = 200
_OTHER = {"a": "b", "b": "a"}


@dataclass(frozen=True)
class Crossing:
    """One packet that matters, drawn from ``sender``'s lane (side ``a``/``b``) to the other's."""

    sender: str
    depart_us: int
    arrive_us: int
    label: str
    tone: Tone
    tooltip: str
    retransmission: bool = False
    cited: bool = False  # a failed wire rule names this packet
    conn: int = 0  # index of its connection in the exchange


@dataclass(frozen=True)
class Mark:
    """A retransmitted segment that is not a crossing: a mark on its sender's edge."""

    sender: str
    t_us: int
    tooltip: str


@dataclass(frozen=True)
class WireLane:
    """The wire lane of one timeline: what to draw, and what was left out (``notes``)."""

    crossings: tuple[Crossing, ...]
    marks: tuple[Mark, ...]
    notes: tuple[str, ...]
    summary: str  # the lane's tooltip: counts of everything the shown connections carried


def wire_lane(
    timeline: Timeline, exchange: Exchange, cited: frozenset[str] = frozenset()
) -> WireLane:
    """The crossings and marks of ``exchange`` for ``timeline``'s picture.

    ``cited`` holds the ``Packet.brief()`` texts a failed wire rule gave as
    evidence; their crossings are emphasised and always drawn.
    """
    links = link([timeline], exchange)
    sides = _sides(timeline, links)
    chosen, unknown, other = _connections(timeline, exchange, links, sides)
    crossings: list[Crossing] = []
    marks: list[Mark] = []
    unplaced = 0
    kinds: Counter[str] = Counter()
    for index, conn in chosen:
        unplaced += sum(1 for p in conn.packets if p.t_us is None)
        for views in segments(conn):
            placed = [p for p in views if p.t_us is not None]
            if not placed:
                continue
            c, m = _crossing(placed, sides, timeline.pair, cited, index)
            kinds[c.label if c else plain_label(placed[0])] += 1
            if c is not None:
                crossings.append(c)
            elif m is not None:
                marks.append(m)
    drawn = _select(crossings)
    notes = _notes(exchange, crossings, drawn, marks, unplaced, unknown, other)
    summary = "wire: " + ", ".join(f"{n} {k}" for k, n in kinds.most_common())
    return WireLane(
        tuple(drawn),
        tuple(sorted(marks, key=lambda m: m.t_us)[:MAX_MARKS]),
        tuple(notes),
        summary if kinds else "wire: no placed packet of this timeline's connections",
    )


def _sides(timeline: Timeline, links: list[Link]) -> dict[str, str]:
    """Each address the timeline's links, connects and events tie to a side (``a``/``b``)."""
    sides: dict[str, str] = {}
    for lk in links:
        if lk.wire is not None:
            sides.setdefault(lk.wire.active[0], lk.active_side)
            sides.setdefault(lk.wire.passive[0], _OTHER[lk.active_side])
    for a in timeline.actions:
        if a.name == "connect" and a.params.get("dst"):
            sides.setdefault(str(a.params["dst"]), _OTHER[a.side])
    for e in timeline.events:
        local, remote = parse_endpoint(e.local), parse_endpoint(e.remote)
        if local is not None:
            sides.setdefault(local[0], e.side)
        if remote is not None:
            sides.setdefault(remote[0], _OTHER[e.side])
    return sides


def _connections(
    timeline: Timeline, exchange: Exchange, links: list[Link], sides: dict[str, str]
) -> tuple[list[tuple[int, Connection]], int, int]:
    """The connections to show, how many have an address of unknown side, how many are others'."""
    linked = {id(lk.wire) for lk in links if lk.wire is not None}
    times = [a.t_us for a in timeline.actions] + [e.t_us for e in timeline.events]
    ends = [a.end_us for a in timeline.actions] + times
    start, end = (min(times), max(ends)) if times else (0, -1)
    chosen, unknown, other = [], 0, 0
    for i, conn in enumerate(exchange.connections):
        if conn.active[0] not in sides or conn.passive[0] not in sides:
            unknown += 1
        elif id(conn) in linked or any(
            p.t_us is not None and start <= p.t_us <= end for p in conn.packets
        ):
            chosen.append((i, conn))
        else:
            other += 1
    return chosen, unknown, other


def _crossing(
    views: list[Packet],
    sides: dict[str, str],
    pair: tuple[str, str],
    cited: frozenset[str],
    conn: int,
) -> tuple[Crossing | None, Mark | None]:
    """The crossing of one segment (or its retransmission mark, or neither)."""
    first = views[0]
    sender = sides[first.src[0]]
    hosts = dict(zip(("a", "b"), pair, strict=True))
    at = {p.point: p.t_us for p in views if p.t_us is not None}
    depart = at.get(hosts[sender], min(at.values()))
    arrive = at.get(hosts[_OTHER[sender]], depart)
    retrans = any(p.retransmission for p in views)
    tip = "\n".join(p.brief() for p in views)
    what = what_matters(first)
    if what is None:
        return None, (Mark(sender, depart, tip) if retrans else None)
    label, tone = what
    hit = any(p.brief() in cited for p in views)
    return Crossing(sender, depart, arrive, label, tone, tip, retrans, hit, conn), None


def _select(crossings: list[Crossing]) -> list[Crossing]:
    """At most MAX_ARROWS: cited and red ones, then whole connections as they began."""
    if len(crossings) <= MAX_ARROWS:
        return sorted(crossings, key=lambda c: c.depart_us)
    red = [c for c in crossings if c.cited or c.tone == "bad"]
    kept = sorted(red, key=lambda c: not c.cited)[:MAX_ARROWS]
    by_conn: dict[int, list[Crossing]] = {}
    for c in crossings:
        if not (c.cited or c.tone == "bad"):
            by_conn.setdefault(c.conn, []).append(c)
    for group in sorted(by_conn.values(), key=lambda g: min(c.depart_us for c in g)):
        if len(kept) + len(group) > MAX_ARROWS:
            break
        kept += group
    return sorted(kept, key=lambda c: c.depart_us)


def _notes(
    exchange: Exchange,
    crossings: list[Crossing],
    drawn: list[Crossing],
    marks: list[Mark],
    unplaced: int,
    unknown: int,
    other: int,
) -> list[str]:
    notes = [
        "wire: arrows leave the sender's lane when its capture saw the packet and reach the "
        "receiver's when its capture did; dashed: retransmitted; ×: another retransmitted segment"
    ]
    for point in exchange.points:
        unc = exchange.uncertainty_us.get(point)
        notes.append(
            f"wire {point}: packets placed ± {unc / 1000:.3f} ms"
            if unc is not None
            else f"wire {point}: not placed on the timeline (no clock samples)"
        )
    if len(drawn) < len(crossings):
        shown = {id(c) for c in drawn}
        left = Counter(c.label for c in crossings if id(c) not in shown)
        counts = ", ".join(f"{n} {k}" for k, n in left.most_common())
        notes.append(f"wire: {len(drawn)} of {len(crossings)} arrows drawn; not drawn: {counts}")
    if len(marks) > MAX_MARKS:
        notes.append(f"wire: {MAX_MARKS} of {len(marks)} retransmissions marked")
    if unplaced:
        notes.append(f"wire: {unplaced} packets without a timeline time left out")
    if unknown:
        notes.append(f"wire: {unknown} connections between addresses of no known side left out")
    if other:
        notes.append(f"wire: {other} connections outside this timeline left out")
    return notes
