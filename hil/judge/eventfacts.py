"""What every event carries: a status its profile allows, and its id's addresses.

``event-status-in-profile``: each event's status is in the set the reporting
host's profile holds for that event type (:meth:`Profile.statuses_of`; the
sets and their driver lines are in :mod:`hil.judge.profiles`).  An event type
the profile has no set for is a profile error, never a pass: the rule names
it so that the profile gets the set, with its source.

``event-addresses-are-the-ids``: an event's ``local``/``remote`` are what
librdmacm holds for its id when the agent reads the event (``route.addr``,
which ``rdma_get_local_addr`` and ``rdma_get_peer_addr`` return: inline in
rdma_cma.h, rdma_get_local_addr(3)).  They must be the id's addresses as the
agent read them through those calls when a ``connect`` or ``accept`` on the id
returned (the action's params ``local``, ``remote``); a CONNECT_REQUEST's
local port must be the port its listener was bound to (the peer connected to
it: cma.c ``iw_conn_req_handler`` copies the provider's addresses into the new
id, 6.1.192 cma.c:2595-2596); and the two ends of a labelled connection must
mirror each other (one TCP connection: each end's local is the other's
remote).  The wire's 4-tuple is the wire rule ``event-addresses-on-the-wire``'s.
"""

from __future__ import annotations

from collections.abc import Iterator

from hil.judge.profiles import Profiles
from hil.judge.records import split_endpoint
from hil.judge.rule import Finding, reporter, rule
from hil.judge.timeline import Action, Event, Timeline


@rule(
    "event-status-in-profile",
    None,
    "Every event's status is in the reporting host's profile's set for its type; a type "
    "the profile has no set for is a profile error",
    "[src] cma.c cma_iw_handler, iw_conn_req_handler, addr_handler; siw_cm.c and cxgb4 cm.c "
    "upcalls (6.1.192; lines in hil/judge/siwprofile.py, cxgb4profile.py); "
    "rdma_get_cm_event(3): status",
)
def event_status_in_profile(tl: Timeline, profile: Profiles) -> Iterator[Finding]:
    for e in tl.events:
        own = reporter(profile, e)
        allowed = own.statuses_of(e.type)
        if allowed is None:
            yield Finding(
                f"profile error: profile {own.name} has no status set for {e.type}, which "
                f"{e.host} reported ({e.id} {e.type}({e.status})); give the profile its set, "
                "with the source",
                (e,),
            )
        elif e.status not in allowed:
            said = f"one of {sorted(allowed)}" if allowed else f"no {e.type} at all on iWARP"
            yield Finding(
                f"{e.id} {e.type}({e.status}) on {e.host}: profile {own.name} allows {said}",
                (e,),
            )


@rule(
    "event-addresses-are-the-ids",
    None,
    "Each event's local and remote address are its id's (rdma_get_local_addr, "
    "rdma_get_peer_addr after connect or accept); a CONNECT_REQUEST's local port is its "
    "listener's; the two ends of a connection mirror each other",
    "[src] cma.c iw_conn_req_handler and cma_iw_handler copy the provider's addresses into "
    "the id (6.1.192); rdma_get_local_addr(3), rdma_get_peer_addr(3): route.addr of the id",
)
def event_addresses_are_the_ids(tl: Timeline, profile: Profiles) -> Iterator[Finding]:
    for a in tl.actions:
        if a.ok and a.id and "local" in a.params:
            yield from _against_id(tl, a)
    yield from _against_listener(tl)
    yield from _mirrored(tl)


def _addressed(tl: Timeline, cm_id: str | None, side: str) -> list[Event]:
    """The events of ``cm_id`` on ``side`` that carry both addresses."""
    return [e for e in tl.events_for(cm_id) if e.side == side and e.local and e.remote]


def _against_id(tl: Timeline, a: Action) -> Iterator[Finding]:
    want = (str(a.params["local"]), str(a.params.get("remote", "")))
    for e in _addressed(tl, a.id, a.side):
        if (e.local, e.remote) != want:
            yield Finding(
                f"{e.id} {e.type} on {e.host} carries {e.local} <-> {e.remote}, but its id's "
                f"rdma_get_local_addr/rdma_get_peer_addr after {a.name} are "
                f"{want[0]} <-> {want[1]}",
                (e,),
                (a,),
            )


def _port(text: str) -> int | None:
    ep = split_endpoint(text)
    return None if ep is None else ep[1]


def _against_listener(tl: Timeline) -> Iterator[Finding]:
    for e in tl.events:
        if e.type != "CONNECT_REQUEST" or not e.local or e.listen_id is None:
            continue
        listens = [a for a in tl.actions_for(e.listen_id, "listen") if a.side == e.side]
        bound = listens[0].params.get("port") if listens else None
        if bound and _port(e.local) != bound:
            yield Finding(
                f"{e.id} CONNECT_REQUEST on {e.host} says its local end is {e.local}, but it "
                f"came through listener {e.listen_id}, bound to port {bound}",
                (e,),
                (listens[0],),
            )


def _mirrored(tl: Timeline) -> Iterator[Finding]:
    for conn in dict.fromkeys(e.conn for e in tl.events if e.conn):
        # Each id's last addressed event: one per end of the connection.
        ends = {e.id: e for e in tl.events_of_conn(conn) if e.local and e.remote}
        for e in ends.values():
            others = [x for x in ends.values() if x.side != e.side]
            if others and all((x.remote, x.local) != (e.local, e.remote) for x in others):
                yield Finding(
                    f"connection {conn}: {e.id} on {e.host} is {e.local} <-> {e.remote}, "
                    "which no end on the other side mirrors",
                    (e, *others),
                )


RULES = (event_status_in_profile, event_addresses_are_the_ids)
