"""The wait queue in the SQL stores: tickets, one per waiter, served in order.

Each function runs inside a transaction of :class:`SqlStore`; the writers
inside a write transaction (the store-wide lock is held).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Any

from hil.reservation.model import Claim, Holder, Ticket, utc
from hil.reservation.sqltx import Tx

log = logging.getLogger(__name__)

# An expired ticket is kept this long: a waiter whose poll came late keeps its place.
TICKET_KEEP = 60.0

TICKET_COLUMNS = "id, seq, claims, holder, created, expires"


def _ticket(row: tuple[Any, ...]) -> Ticket:
    id_, seq, claims, holder, created, expires = row
    return Ticket(
        str(id_),
        int(seq),
        tuple(Claim(p, (a, b)) for p, a, b in json.loads(claims)),
        Holder.from_json(json.loads(holder)),
        utc(created),
        utc(expires),
    )


def insert(tx: Tx, ticket: str, claims: Sequence[Claim], holder: Holder, ttl: float) -> int:
    """Put ``ticket`` at the back of the queue; its place."""
    seq = int(tx.q("SELECT COALESCE(MAX(seq), 0) + 1 FROM hil_tickets")[0][0])
    tx.q(
        f"INSERT INTO hil_tickets ({TICKET_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)",
        (
            ticket,
            seq,
            json.dumps([[c.pair, *c.hosts] for c in claims]),
            json.dumps(holder.to_json()),
            tx.now,
            tx.now + ttl,
        ),
    )
    return seq


def touch(tx: Tx, ticket: str, claims: Sequence[Claim], holder: Holder, ttl: float) -> int:
    """Renew our ticket and return its place; rejoin at the back if it is gone."""
    rows = tx.q("SELECT seq, expires FROM hil_tickets WHERE id = ?", (ticket,))
    if not rows:
        log.warning("wait ticket %s had expired; rejoining the queue at the back", ticket)
        return insert(tx, ticket, claims, holder, ttl)
    seq, expires = rows[0]
    # Renew only past half its life: a poll that writes nothing commits
    # without a disk flush, and waiters poll often.
    if expires - tx.now < ttl / 2:
        tx.q("UPDATE hil_tickets SET expires = ? WHERE id = ?", (tx.now + ttl, ticket))
    return int(seq)


def queued_hosts(tx: Tx, seq: int | None, ticket: str | None) -> set[str]:
    """Hosts that live tickets ahead of us wait for (all of them, without a ticket)."""
    rows = tx.q("SELECT id, seq, claims FROM hil_tickets WHERE expires > ?", (tx.now,))
    hosts: set[str] = set()
    for id_, other_seq, claims in rows:
        if id_ != ticket and (seq is None or other_seq < seq):
            hosts.update(h for _, a, b in json.loads(claims) for h in (a, b))
    return hosts


def remove(tx: Tx, ticket: str) -> None:
    """Take ``ticket`` out of the queue (served, or its waiter gave up)."""
    tx.q("DELETE FROM hil_tickets WHERE id = ?", (ticket,))


def live(tx: Tx) -> list[Ticket]:
    """The tickets not expired, in queue order."""
    rows = tx.q(
        f"SELECT {TICKET_COLUMNS} FROM hil_tickets WHERE expires > ? ORDER BY seq", (tx.now,)
    )
    return [_ticket(r) for r in rows]


def collect_garbage(tx: Tx) -> None:
    """Drop the tickets expired longer than ``TICKET_KEEP`` ago."""
    tx.q("DELETE FROM hil_tickets WHERE expires < ?", (tx.now - TICKET_KEEP,))
