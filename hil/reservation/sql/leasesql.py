"""Leases in the SQL stores: granting, taking over, renewing, fencing, and what a
lost lease's holder is told.

Each function runs inside a transaction of :class:`SqlStore`; the writers
inside a write transaction (the store-wide lock is held).
"""

from __future__ import annotations

import json
import logging
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from hil.errors import LeaseLost
from hil.reservation.model import Claim, Holder, Lease, utc
from hil.reservation.sql import attemptsql, fencesql, healthsql, ticketsql
from hil.reservation.sqltx import Tx

log = logging.getLogger(__name__)

# How long leftovers are kept: an expired lease nobody took over can still be
# renewed for an hour; a taken-over lease's successor is reported for a day.
EXPIRED_LEASE_KEEP = 3600.0
LOST_KEEP = 86400.0

LEASE_COLUMNS = "id, pair, host_a, host_b, holder, acquired, expires, ttl, token"


@dataclass(frozen=True)
class LeaseRow:
    """A lease as stored, with its expiry in the store's clock."""

    lease: Lease
    expires_ts: float


def _lease(row: tuple[Any, ...]) -> LeaseRow:
    id_, pair, a, b, holder, acquired, expires, ttl, token = row
    lease = Lease(
        str(id_),
        str(pair),
        (str(a), str(b)),
        Holder.from_json(json.loads(holder)),
        utc(acquired),
        utc(expires),
        float(ttl),
        int(token),
    )
    return LeaseRow(lease, float(expires))


def new_id() -> str:
    """A fresh id for a lease or a wait ticket."""
    return secrets.token_hex(8)


def acquire(
    tx: Tx,
    claims: Sequence[Claim],
    holder: Holder,
    ttl: float,
    ticket: str | None,
    ticket_ttl: float,
) -> Lease | None:
    """A lease on the first of ``claims`` whose hosts are free, or None; a waiter's
    ``ticket`` is renewed, and hosts that tickets ahead of it wait for are not free."""
    collect_garbage(tx)
    seq = ticketsql.touch(tx, ticket, claims, holder, ticket_ttl) if ticket else None
    rows = [_lease(r) for r in tx.q(f"SELECT {LEASE_COLUMNS} FROM hil_leases")]
    held = {h for r in rows if r.expires_ts > tx.now for h in r.lease.hosts}
    # A quarantined host is never handed out (reserve() says why).
    blocked = held | ticketsql.queued_hosts(tx, seq, ticket) | healthsql.quarantined(tx)
    claim = next((c for c in claims if not blocked.intersection(c.hosts)), None)
    if claim is None:
        return None
    lease = _grant(tx, claim, holder, ttl, [r.lease for r in rows])
    if ticket:
        ticketsql.remove(tx, ticket)
    return lease


def _grant(tx: Tx, claim: Claim, holder: Holder, ttl: float, leases: list[Lease]) -> Lease:
    """Insert a lease on ``claim``, taking over the expired ones on its hosts."""
    token = fencesql.next_token(tx)
    lease = Lease(
        new_id(), claim.pair, claim.hosts, holder, utc(tx.now), utc(tx.now + ttl), ttl, token
    )
    for old in leases:
        if set(old.hosts) & set(claim.hosts):
            _take_over(tx, old, lease.id, holder)
    tx.q(
        f"INSERT INTO hil_leases ({LEASE_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            lease.id,
            claim.pair,
            *claim.hosts,
            json.dumps(holder.to_json()),
            tx.now,
            tx.now + ttl,
            ttl,
            token,
        ),
    )
    return lease


def _take_over(tx: Tx, old: Lease, successor: str, holder: Holder) -> None:
    """Drop the expired ``old`` lease, remembering who took its hosts (lease ``successor``)."""
    log.warning("taking over expired %s for %s (lease %s)", old, holder, successor)
    tx.q("DELETE FROM hil_leases WHERE id = ?", (old.id,))
    tx.q(
        "INSERT INTO hil_lost (lease_id, pair, expired, taken_by, taker, taken_at)"
        " VALUES (?, ?, ?, ?, ?, ?)",
        (old.id, old.pair, old.expires.timestamp(), successor, str(holder), tx.now),
    )


def collect_garbage(tx: Tx) -> None:
    """Drop what is kept no longer: leases, takeovers, tickets, health, attempts."""
    tx.q("DELETE FROM hil_leases WHERE expires < ?", (tx.now - EXPIRED_LEASE_KEEP,))
    tx.q("DELETE FROM hil_lost WHERE taken_at < ?", (tx.now - LOST_KEEP,))
    ticketsql.collect_garbage(tx)
    healthsql.collect_garbage(tx)
    attemptsql.collect_garbage(tx)


def find(tx: Tx, lease_id: str) -> LeaseRow | None:
    """The lease's row, or None when it is gone."""
    found = tx.q(f"SELECT {LEASE_COLUMNS} FROM hil_leases WHERE id = ?", (lease_id,))
    return _lease(found[0]) if found else None


def held(tx: Tx, lease_id: str, store_url: str) -> LeaseRow:
    """The lease's row; ``LeaseLost`` naming the new holder when it is gone."""
    row = find(tx, lease_id)
    if row is None:
        raise LeaseLost(lost_message(tx, lease_id, store_url))
    return row


def fence(tx: Tx, lease_id: str, token: int, store_url: str) -> Lease:
    """Check inside ``tx`` that ``lease_id`` is held with ``token``, renewing it if it
    expired with nobody taking it over; ``LeaseLost`` otherwise."""
    row = held(tx, lease_id, store_url)
    if row.lease.token != token:
        raise LeaseLost(fencesql.stale(lease_id, row.lease.pair, token, row.lease.token))
    return renew(tx, row, None) if row.expires_ts <= tx.now else row.lease


def renew(tx: Tx, old: LeaseRow, ttl: float | None) -> Lease:
    """``old`` extended by ``ttl`` (its own when None) from now."""
    if old.expires_ts <= tx.now:
        # Nobody took the hosts since it expired: nothing was lost.
        log.warning("renewing %s after it expired (nobody took it over)", old.lease)
    ttl = old.lease.ttl if ttl is None else ttl
    tx.q(
        "UPDATE hil_leases SET expires = ?, ttl = ? WHERE id = ?",
        (tx.now + ttl, ttl, old.lease.id),
    )
    return replace(old.lease, expires=utc(tx.now + ttl), ttl=ttl)


def lost_message(tx: Tx, lease_id: str, store_url: str) -> str:
    """Why ``lease_id`` is not held: who took it over and when, or that it is unknown."""
    rows = tx.q(
        "SELECT pair, expired, taken_by, taker, taken_at FROM hil_lost WHERE lease_id = ?",
        (lease_id,),
    )
    if not rows:
        return (
            f"lease {lease_id} is unknown to store {store_url}: it was released, "
            "or expired long ago; reserve the pair again"
        )
    pair, expired, taken_by, taker, taken_at = rows[0]
    return (
        f"lease {lease_id} on pair {pair} expired at {utc(expired):%H:%M:%S} UTC "
        f"(heartbeat missed) and was taken over at {utc(taken_at):%H:%M:%S} UTC by "
        f"{taker} (lease {taken_by}); stop using its hosts and reserve again"
    )


def release(tx: Tx, lease_id: str) -> None:
    """Drop the lease (nothing when it is gone already)."""
    tx.q("DELETE FROM hil_leases WHERE id = ?", (lease_id,))


def live(tx: Tx) -> list[Lease]:
    """The leases not expired, oldest first."""
    rows = tx.q(
        f"SELECT {LEASE_COLUMNS} FROM hil_leases WHERE expires > ? ORDER BY acquired",
        (tx.now,),
    )
    return [_lease(r).lease for r in rows]
