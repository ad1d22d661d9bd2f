"""Which listener a connect request reaches: the rule ``request-reaches-its-listener``.

rdma_listen(3): "If the rdma_cm_id is bound to a specific IP address, the
listen will be restricted to that address and the associated RDMA device.
If the rdma_cm_id is bound to an RDMA port number only, the listen will
occur across all RDMA devices."  So a CONNECT_REQUEST (its ``listen_id``
names the listener it came through, rdma_cm.h ``struct rdma_cm_event``)
must come through a listener bound to the connect's port and to its
destination address or the wildcard; and while a listener bound to exactly
that address and port listens, never through another one.  Linux rdma_cm
refuses a wildcard and a specific listener on one port (cma.c
``cma_check_port``, 6.1: -EADDRNOTAVAIL at the second rdma_bind_addr), so
that last clause can only fail on a stack that allows both.

The destination is the connect's (``dst``, ``port``) when the timeline holds
the connect of the request's connection, else the request's own local
address.  A listen action recorded without its address (older timelines) is
judged by its port alone.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator

from hil.judge.profiles import Profiles
from hil.judge.records import split_endpoint
from hil.judge.rule import Finding, rule
from hil.judge.timeline import Action, Event, Timeline


@rule(
    "request-reaches-its-listener",
    None,
    "A connect request arrives through a listener bound to its destination port and to its "
    "destination address or the wildcard, and through the one bound to exactly that address "
    "while it listens",
    "[src] rdma_listen(3): a listen bound to a specific address is restricted to that address; "
    "rdma_cm.h struct rdma_cm_event listen_id; [src] cma.c cma_check_port (6.1)",
)
def request_reaches_its_listener(tl: Timeline, profile: Profiles) -> Iterator[Finding]:
    listens = [a for a in tl.actions if a.name == "listen" and a.ok and a.id]
    for e in (e for e in tl.events if e.type == "CONNECT_REQUEST" and e.listen_id):
        got = next((a for a in listens if a.id == e.listen_id), None)
        target = _target(tl, e)
        if got is None or target is None:
            continue
        if not _binds(got, target):
            yield Finding(
                f"a request for {_text(target)} arrived through listener {got.id} bound "
                f"to {_bound(got)}",
                (e,),
                (got,),
            )
        elif _is_wildcard(got):
            exact = [a for a in listens if a is not got and _exact(a, target) and _up(tl, a, e)]
            if exact:
                yield Finding(
                    f"a request for {_text(target)} arrived through the wildcard listener "
                    f"{got.id}, though {exact[0].id} listened on exactly that address",
                    (e,),
                    (got, exact[0]),
                )


Target = tuple[str, int]


def _target(tl: Timeline, e: Event) -> Target | None:
    """Where the request was sent: its connect's destination, else its local address."""
    conn = tl.conn_of(e.id)
    peers = {x.id for x in tl.events_of_conn(conn) if x.side != e.side} if conn else set()
    connect = next((a for a in tl.actions if a.name == "connect" and a.id in peers), None)
    if connect is not None and "dst" in connect.params and "port" in connect.params:
        return str(connect.params["dst"]), int(connect.params["port"])
    return split_endpoint(e.local)


def _same(a: str, b: str) -> bool:
    try:
        return ipaddress.ip_address(a) == ipaddress.ip_address(b)
    except ValueError:
        return a == b


def _is_wildcard(listen: Action) -> bool:
    address = str(listen.params.get("address", ""))
    try:
        return ipaddress.ip_address(address).is_unspecified
    except ValueError:
        return False


def _binds(listen: Action, target: Target) -> bool:
    """Whether ``listen`` may take a request for ``target`` (no address recorded: any)."""
    if int(listen.params.get("port", -1)) != target[1]:
        return False
    address = listen.params.get("address")
    return address is None or _is_wildcard(listen) or _same(str(address), target[0])


def _exact(listen: Action, target: Target) -> bool:
    address = listen.params.get("address")
    return (
        address is not None
        and int(listen.params.get("port", -1)) == target[1]
        and _same(str(address), target[0])
    )


def _up(tl: Timeline, listen: Action, e: Event) -> bool:
    """Whether ``listen``'s listener was listening when ``e`` arrived (same host)."""
    ended = any(a.name == "destroy" and a.id == listen.id and a.t_us <= e.t_us for a in tl.actions)
    return listen.side == e.side and listen.end_us <= e.t_us and not ended


def _bound(listen: Action) -> str:
    address = listen.params.get("address")
    return (
        f"{address}:{listen.params.get('port')}" if address else f"port {listen.params.get('port')}"
    )


def _text(target: Target) -> str:
    host, port = target
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


RULES = (request_reaches_its_listener,)
