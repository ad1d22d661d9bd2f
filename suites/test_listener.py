"""Listener semantics: a destroy with connect requests pending and ids already accepted,
accepting after a reject, and which listener each request reaches.

Parameters: ``direction`` and ``(pending, accepted)``: how many connects
are left unretrieved on the listener and how many were accepted before it
is destroyed.  The contract judges ``listener-destroy-rejects-pending``
(pending requests are REJECTED, accepted ids stay connected),
``listener-destroy-bounded`` (the destroy returns within the profile's
bound) and ``no-event-after-destroy`` (nothing arrives through the destroyed
listener); the tests add that every pending connect got its answer and
every accepted connection closed orderly afterwards.  A run in which the
paused channel did not hold every request pending at the destroy (one was
retrieved or answered first) fails as "scenario not reached": the rule
would have judged fewer pending requests than the test claims.  An accepted
connection must stay up from the destroy to the test's own close: no
DISCONNECTED before that close (the contract's rule, and the test's own
check), no FIN, RST or TERMINATE on the wire (``listener-destroy-keeps-accepted``).

``reject_then_accept`` and ``listener_addresses`` are judged by the contract's
``request-reaches-its-listener`` (rdma_listen(3)); the tests add that each
scenario happened: the second connect established, each listener got one
request, the wildcard's neighbour on its port was refused.
"""

from __future__ import annotations

import pytest

from hil.cm import sequences
from hil.cm.session import CMSession
from hil.judge.destroys import pending_at
from hil.judge.rule import errno_name
from hil.judge.timeline import Timeline
from hil.plugin.api import Contract, explain, seen


@pytest.mark.parametrize(
    ("pending", "accepted"),
    [(2, 1), (3, 0), (0, 1)],
    ids=["2-pending-1-accepted", "3-pending", "1-accepted"],
)
def test_listener_destroy_rejects_pending_and_keeps_accepted(
    cm: CMSession, contract: Contract, pending: int, accepted: int
) -> None:
    """Pending requests end (REJECTED), accepted connections survive the listener."""
    tl = cm.run(sequences.listener_destroy, pending=pending, accepted=accepted)
    contract(tl)
    listener = next(a.id for a in tl.actions if a.name == "listen")
    destroy = next((a for a in tl.actions if a.name == "destroy" and a.id == listener), None)
    assert destroy is not None, explain(tl, "the listener was never destroyed")
    held = pending_at(tl, destroy)
    assert len(held) == pending, explain(
        tl,
        f"scenario not reached: {len(held)} of {pending} connects were pending on the "
        "listener when it was destroyed (the paused channel did not hold the others)",
    )
    for i in range(pending):
        replies = [
            e
            for e in tl.events
            if e.conn == f"p{i}"
            and e.side == cm.active
            and e.type in ("ESTABLISHED", "REJECTED", "UNREACHABLE", "CONNECT_ERROR")
        ]
        assert len(replies) == 1, explain(tl, f"pending connect p{i} got no single reply")
    for i in range(accepted):
        closes = [e for e in tl.events if e.conn == f"c{i}" and e.type == "DISCONNECTED"]
        assert len(closes) == 2, explain(
            tl, f"accepted connection c{i} should outlive the listener and close on both sides"
        )
        early = _disconnected_before_own_close(tl, f"c{i}")
        assert not early, explain(
            tl, f"accepted connection c{i} was DISCONNECTED before the test closed it"
        )
    assert "destroy_blocked_us" in tl.metrics, explain(tl, "the listener destroy did not complete")
    assert len(seen(tl, "ESTABLISHED")) >= 2 * accepted, explain(tl, "accepts did not establish")


def _disconnected_before_own_close(tl: Timeline, conn: str) -> list[str]:
    """The DISCONNECTED of ``conn`` that came before the test's own rdma_disconnect of it
    (rdma_disconnect on an id already closed succeeds: its success proves nothing)."""
    ids = {e.id for e in tl.events if e.conn == conn}
    close = min((a.t_us for a in tl.actions if a.name == "disconnect" and a.id in ids), default=0)
    return [e.brief() for e in seen(tl, "DISCONNECTED") if e.id in ids and e.t_us < close]


def test_a_listener_accepts_the_next_request_after_a_reject(
    cm: CMSession, contract: Contract
) -> None:
    """A reject ends one request, not the listener: the next connect is accepted."""
    tl = cm.run(sequences.reject_then_accept)
    contract(tl)
    assert [e.conn for e in seen(tl, "REJECTED", cm.active)] == ["c1"], explain(
        tl, "the first connect should be REJECTED"
    )
    for side in (cm.active, cm.passive):
        assert [e.conn for e in seen(tl, "ESTABLISHED", side)] == ["c2"], explain(
            tl, f"the connect after the reject should be ESTABLISHED on side {side}"
        )
    listener = next(a.id for a in tl.actions if a.name == "listen")
    assert [e.listen_id for e in seen(tl, "CONNECT_REQUEST")] == [listener] * 2, explain(
        tl, "both requests should come through the one listener"
    )


def test_two_listeners_on_one_port_each_get_their_own_address(
    cm: CMSession, contract: Contract
) -> None:
    """rdma_listen(3): a listener bound to an address takes that address's requests only."""
    tl = cm.run(sequences.listener_addresses, kind="addresses")
    contract(tl)
    _one_request_each(tl)


def test_a_wildcard_listener_beside_a_specific_one_each_get_their_own(
    cm: CMSession, contract: Contract
) -> None:
    """The wildcard takes its port's requests, a specific listener its own; rdma_cm
    refuses a specific listener on the wildcard's port (cma.c cma_check_port, 6.1:
    -EADDRNOTAVAIL; rdma_bind_addr(3) names no errno)."""
    tl = cm.run(sequences.listener_addresses, kind="wildcard")
    contract(tl)
    beside = [a for a in tl.actions if a.name == "listen"][1]
    assert errno_name(beside.result) in ("EADDRNOTAVAIL", "EADDRINUSE"), explain(
        tl, f"a specific listener on the wildcard's port should be refused: {beside.brief()}"
    )
    _one_request_each(tl)


def _one_request_each(tl: Timeline) -> None:
    """Each listener that listened got exactly one request, and each connection
    established on both sides."""
    listeners = [a.id for a in tl.actions if a.name == "listen" and a.ok]
    got = [e.listen_id for e in seen(tl, "CONNECT_REQUEST")]
    assert sorted(got, key=str) == sorted(listeners, key=str), explain(
        tl, f"expected one request through each of {listeners}"
    )
    assert len(seen(tl, "ESTABLISHED")) == 2 * len(listeners), explain(
        tl, "each connection should be ESTABLISHED on both sides"
    )
