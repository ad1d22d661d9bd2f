"""What a listener promises: it goes on accepting after a reject, and each listener
gets only the requests for its own address and port.

The contract's ``request-reaches-its-listener`` judges which listener each
CONNECT_REQUEST came through (its ``listen_id``); these sequences make the
cases: two listeners on one port bound to two addresses of the passive
host, and a wildcard listener beside a specific one.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from hil.cm import steps
from hil.cm.registry import sequence
from hil.cm.sequences.common import choice
from hil.errors import InputError
from hil.host.journal import agent_undo
from hil.judge.timeline import Timeline

if TYPE_CHECKING:
    from hil.cm.recording import Recording
    from hil.cm.sides import PairSides
    from hil.cm.steps import Listener

KINDS = ("addresses", "wildcard")
WILDCARDS = {4: "0.0.0.0", 6: "::"}


@sequence
def reject_then_accept(s: PairSides) -> Timeline:
    """The passive side rejects a request, then accepts the next one on the same listener;
    both sides ESTABLISHED, then an orderly close."""
    with s.recording("reject-then-accept") as rec:
        listener = steps.listen(rec, s.passive)
        active = rec.endpoint(s.active)
        first, req = steps.request(rec, active, listener, "c1", b"hil-c1", "the request to reject")
        listener.ep.reject(req.id, b"not this one")
        steps.expect(active, steps.REPLY_TYPES, first.id, "the reject of c1")
        steps.destroy(active, first.id)
        steps.destroy(listener.ep, req.id)
        conn = steps.establish(rec, active, listener, "c2", b"hil-c2")
        steps.payload(conn)
        steps.close(conn, "active")
        steps.teardown(conn)
        steps.destroy(listener.ep, listener.id)
    return rec.timeline()


@sequence
def listener_addresses(s: PairSides, kind: str = "addresses") -> Timeline:
    """Two listeners on the passive host, one connection to each; each request must come
    through its own listener.

    ``addresses``: one port, bound to the data address and to a second address
    the sequence adds to the passive port for the run (journaled, removed
    again); ``wildcard``: one listener on the wildcard address and another on
    the data address and a second port, after a try to bind the data address
    on the wildcard's port (rdma_cm refuses it: cma.c ``cma_check_port``).
    """
    choice("kind", kind, KINDS)
    if kind == "addresses":
        with _extra_address(s) as extra, s.recording("listeners-addresses") as rec:
            ep = rec.endpoint(s.passive)
            first = steps.listen(rec, s.passive, ep=ep)
            second = steps.listen(rec, s.passive, ep=ep, address=extra, port=first.port)
            _one_each(rec, (first, second))
        return rec.timeline()
    with s.recording("listeners-wildcard") as rec:
        ep = rec.endpoint(s.passive)
        family = ipaddress.ip_address(s.address(s.passive)).version
        anywhere = steps.listen(rec, s.passive, ep=ep, address=WILDCARDS[family])
        beside = ep.listen(s.address(s.passive), anywhere.port)  # its refusal is the result
        specific = steps.listen(rec, s.passive, ep=ep)
        _one_each(rec, (anywhere, specific))
        steps.destroy(ep, beside.id)
    return rec.timeline()


def _one_each(rec: Recording, listeners: tuple[Listener, ...]) -> None:
    """A connection to each listener (c1, c2, ...), closed; then every listener destroyed."""
    s = rec.session
    active = rec.endpoint(s.active)
    for i, listener in enumerate(listeners, 1):
        conn = steps.establish(rec, active, listener, f"c{i}", f"hil-c{i}".encode())
        steps.payload(conn)
        steps.close(conn, "active")
        steps.teardown(conn)
    for listener in listeners:
        steps.destroy(listener.ep, listener.id)


@contextmanager
def _extra_address(s: PairSides) -> Iterator[str]:
    """A second address on the passive port for the block: the last free address of its
    subnet in the session's family (the lab's 198.18.c.0/24: .254; 2001:2:0:c::/64:
    ...:fffe), journaled before it is added and removed
    after (one already there is used as it is)."""
    if s.journal is None:
        raise InputError("listener_addresses kind=addresses adds an address: it needs a journal")
    rnic, host = s.rnic(s.passive), s.host(s.passive)
    address = rnic.address_of(s.family)  # the session's family: the active connects on it
    assert address is not None  # PairSides checked
    net = address.network
    taken = {ipaddress.ip_address(s.address(side)) for side in ("a", "b")}
    last = [net.broadcast_address - k for k in (1, 2)] if net.num_addresses >= 4 else []
    free = [str(a) for a in last if a not in taken]
    if not free:
        raise InputError(
            f"port {rnic.name} of {host}: subnet {net} has no free address "
            "for a second listener address"
        )
    extra = f"{free[0]}/{net.prefixlen}"
    agent = s.agent(s.passive)
    if any(str(a.address) == extra for a in agent.addresses(rnic.netdev)):
        yield free[0]
        return
    undo = agent_undo(
        "delete_address", f"remove {extra} from {rnic.netdev}", netdev=rnic.netdev, address=extra
    )
    undo.update(missing_ok=True, listener_address=extra)
    s.journal.change(host, undo)
    agent.add_address(rnic.netdev, extra)
    try:
        yield free[0]
    finally:
        s.journal.undo(s.journal.find([host], listener_address=extra))
