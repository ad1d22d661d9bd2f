"""Taking a pair: at once, or by queueing first come first served."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence

from hil.errors import BusyError, HilError, InputError, NotReady, WaitTimeout
from hil.reservation.health import HostHealth
from hil.reservation.model import Claim, Holder, Lease, Ticket
from hil.reservation.store import Store

log = logging.getLogger(__name__)

# A waiter says again where it stands at least this often, even unchanged.
PROGRESS_EVERY = 30.0
# By default a wait ticket outlives several missed polls (a loaded machine
# may stall a waiter for a second) but not many, so a killed waiter stops
# blocking the queue within seconds: max(TICKET_TTL, 10 polls).
TICKET_TTL = 5.0


def reserve(
    store: Store,
    claims: Sequence[Claim],
    holder: Holder,
    ttl: float = 300.0,
    wait: float = 0.0,
    poll: float = 0.5,
    progress: Callable[[str], None] | None = None,
    ticket_ttl: float | None = None,
) -> Lease:
    """Take the first free pair of ``claims`` (in order) for ``holder``.

    With ``wait`` 0, raise ``BusyError`` naming who holds each pair.  With
    ``wait`` > 0, queue first come first served, polling every ``poll``
    seconds and telling ``progress`` where we stand, and raise
    ``WaitTimeout`` naming the holders after ``wait`` seconds.  Our place in
    the queue lapses ``ticket_ttl`` seconds after our last poll (default
    max(TICKET_TTL, 10 polls)), should this process die.  When every claim
    has a quarantined host, raise ``NotReady`` instead (waiting would not
    help), naming each host that is out, why and since when.
    """
    claims = list(claims)
    if not claims:
        raise InputError("no pair to reserve: no pair of the inventory matches")
    if wait <= 0:
        lease = store.try_acquire(claims, holder, ttl)
        if lease is None:
            _check_not_all_out(store, claims)
            raise BusyError(f"no pair is free: {describe(store, claims)}")
        return lease
    if ticket_ttl is None:
        ticket_ttl = max(TICKET_TTL, 10 * poll)
    return _queue(store, claims, holder, ttl, wait, poll, ticket_ttl, progress)


def _queue(
    store: Store,
    claims: list[Claim],
    holder: Holder,
    ttl: float,
    wait: float,
    poll: float,
    ticket_ttl: float,
    progress: Callable[[str], None] | None,
) -> Lease:
    deadline = time.monotonic() + wait
    ticket = store.enqueue(claims, holder, ticket_ttl)
    said, said_at = "", 0.0
    try:
        while True:
            lease = store.try_acquire(claims, holder, ttl, ticket=ticket, ticket_ttl=ticket_ttl)
            if lease is not None:
                return lease
            _check_not_all_out(store, claims)
            left = deadline - time.monotonic()
            if left <= 0:
                break
            if progress is not None:
                state = describe(store, claims, ticket)
                if state != said or time.monotonic() - said_at > PROGRESS_EVERY:
                    progress(f"waiting for a pair ({left:.0f} s left): {state}")
                    said, said_at = state, time.monotonic()
            time.sleep(min(poll, left))
    except BaseException:
        _leave(store, ticket)
        raise
    _leave(store, ticket)
    raise WaitTimeout(f"no pair became free within {wait:g} s: {describe(store, claims)}")


def _leave(store: Store, ticket: str) -> None:
    """Leave the queue; if the store fails, the ticket expires by itself."""
    try:
        store.dequeue(ticket)
    except HilError as e:
        log.warning("could not leave the wait queue (ticket %s): %s", ticket, e)


def _quarantined(store: Store, claims: Sequence[Claim]) -> dict[str, HostHealth]:
    """The claims' hosts that are quarantined, by name."""
    hosts = sorted({h for c in claims for h in c.hosts})
    return {h.host: h for h in store.host_health(hosts) if h.state == "quarantined"}


def _out(claim: Claim, quarantined: dict[str, HostHealth]) -> str | None:
    """``pair ab (a, b) is out: host a is quarantined since ...``, or None."""
    out = [f"host {quarantined[h]}" for h in claim.hosts if h in quarantined]
    return f"pair {claim} is out: {'; '.join(out)}" if out else None


def _check_not_all_out(store: Store, claims: Sequence[Claim]) -> None:
    """``NotReady`` when every claim has a quarantined host."""
    quarantined = _quarantined(store, claims)
    outs = [_out(c, quarantined) for c in claims]
    if all(outs):
        raise NotReady(
            f"no pair can be handed out: {'; '.join(o for o in outs if o)}; once the host "
            "is fixed, `hil host release-quarantine HOST` (a quarantine set by hand), or "
            "a passing `hil lab-check` (one set by failures), puts it back in service"
        )


def describe(store: Store, claims: Sequence[Claim], own_ticket: str | None = None) -> str:
    """Who keeps each claim from us: a quarantined host, its holders, or the waiters ahead."""
    leases = store.leases()
    tickets = store.tickets()
    quarantined = _quarantined(store, claims)
    own = next((t for t in tickets if t.id == own_ticket), None)
    ahead = [t for t in tickets if own is None or t.seq < own.seq]
    parts = []
    for claim in claims:
        hosts = set(claim.hosts)
        out = _out(claim, quarantined)
        if out:
            parts.append(out)
            continue
        holders = [le for le in leases if hosts & set(le.hosts)]
        if holders:
            parts.append(
                f"pair {claim} is held by "
                + ", ".join(
                    f"{le.holder} until {le.expires:%H:%M:%S} UTC (lease {le.id} on {le.pair})"
                    for le in holders
                )
            )
            continue
        waiters = [t for t in ahead if hosts & _hosts(t)]
        if waiters:
            parts.append(
                f"pair {claim} is free but queued for by "
                + ", ".join(str(t.holder) for t in waiters)
            )
        else:
            parts.append(f"pair {claim} is free now")
    return "; ".join(parts)


def _hosts(ticket: Ticket) -> set[str]:
    return {h for c in ticket.claims for h in c.hosts}
