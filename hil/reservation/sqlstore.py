"""The reservation logic both SQL stores share.

Every change runs in one transaction that holds the store-wide write lock
(SQLite's ``BEGIN IMMEDIATE``, a PostgreSQL advisory transaction lock), reads
the few rows it needs, decides in Python and writes.  Serializing all writers
is what makes "two leases never hold one host" easy to see correct, and the
tables stay tiny (one row per live lease or waiter), so it costs nothing.

Time is seconds since the epoch from the store's clock (``Tx.now``): the
local wall clock for SQLite, the server's for PostgreSQL, so several CI
machines sharing a server agree on expiry.
"""

from __future__ import annotations

import abc
import json
import logging
import secrets
import threading
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from typing import Any

from hil.errors import InputError, LeaseLost, StoreError
from hil.reservation import attemptsql, fencesql, healthsql, sqlschema
from hil.reservation.attempt import Attempt
from hil.reservation.health import HealthRecord, HostHealth
from hil.reservation.model import Claim, Holder, JournalEntry, Lease, Ticket, utc
from hil.reservation.sqltx import Tx
from hil.reservation.store import Store

log = logging.getLogger(__name__)

# How long leftovers are kept: an expired lease nobody took over can still be
# renewed for an hour; a taken-over lease's successor is reported for a day.
EXPIRED_LEASE_KEEP = 3600.0
LOST_KEEP = 86400.0
TICKET_KEEP = 60.0

LEASE_COLUMNS = "id, pair, host_a, host_b, holder, acquired, expires, ttl, token"
TICKET_COLUMNS = "id, seq, claims, holder, created, expires"


@dataclass(frozen=True)
class _LeaseRow:
    lease: Lease
    expires_ts: float


def _lease(row: tuple[Any, ...]) -> _LeaseRow:
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
    return _LeaseRow(lease, float(expires))


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


def _new_id() -> str:
    return secrets.token_hex(8)


class SqlStore(Store):
    """``Store`` over a SQL database; subclasses supply connections and clocks."""

    def __init__(self) -> None:
        # One connection per store; the lock makes the store safe to share
        # with a heartbeat thread.
        self._lock = threading.RLock()

    @abc.abstractmethod
    def _transaction(self, write: bool) -> AbstractContextManager[Tx]:
        """A transaction; ``write`` ones hold the store-wide write lock."""

    @abc.abstractmethod
    def _columns(self, tx: Tx, table: str) -> set[str]:
        """The names of ``table``'s columns, from the database's catalogue."""

    def _create_tables(self, id_column: str) -> None:
        """Create and migrate the tables (:func:`sqlschema.create`); on a StoreError the
        store is closed and it is raised."""
        try:
            with self._lock, self._transaction(write=True) as tx:
                sqlschema.create(tx, id_column, self._columns)
        except StoreError:
            self.close()
            raise

    # -- leases ---------------------------------------------------------

    def try_acquire(
        self,
        claims: Sequence[Claim],
        holder: Holder,
        ttl: float,
        ticket: str | None = None,
        ticket_ttl: float = 5.0,
    ) -> Lease | None:
        _check_ttl(ttl)
        with self._lock, self._transaction(write=True) as tx:
            self._collect_garbage(tx)
            seq = self._touch_ticket(tx, ticket, claims, holder, ticket_ttl) if ticket else None
            rows = [_lease(r) for r in tx.q(f"SELECT {LEASE_COLUMNS} FROM hil_leases")]
            held = {h for r in rows if r.expires_ts > tx.now for h in r.lease.hosts}
            # A quarantined host is never handed out (reserve() says why).
            blocked = held | self._queued_hosts(tx, seq, ticket) | healthsql.quarantined(tx)
            claim = next((c for c in claims if not blocked.intersection(c.hosts)), None)
            if claim is None:
                return None
            lease = self._grant(tx, claim, holder, ttl, [r.lease for r in rows])
            if ticket:
                tx.q("DELETE FROM hil_tickets WHERE id = ?", (ticket,))
            return lease

    def _grant(
        self, tx: Tx, claim: Claim, holder: Holder, ttl: float, leases: list[Lease]
    ) -> Lease:
        """Insert a lease on ``claim``, taking over the expired ones on its hosts."""
        token = fencesql.next_token(tx)
        lease = Lease(
            _new_id(), claim.pair, claim.hosts, holder, utc(tx.now), utc(tx.now + ttl), ttl, token
        )
        for old in leases:
            if set(old.hosts) & set(claim.hosts):
                self._take_over(tx, old, lease.id, holder)
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

    def _take_over(self, tx: Tx, old: Lease, new_id: str, holder: Holder) -> None:
        """Drop the expired ``old`` lease, remembering who took its hosts."""
        log.warning("taking over expired %s for %s (lease %s)", old, holder, new_id)
        tx.q("DELETE FROM hil_leases WHERE id = ?", (old.id,))
        tx.q(
            "INSERT INTO hil_lost (lease_id, pair, expired, taken_by, taker, taken_at)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            (old.id, old.pair, old.expires.timestamp(), new_id, str(holder), tx.now),
        )

    def _collect_garbage(self, tx: Tx) -> None:
        tx.q("DELETE FROM hil_leases WHERE expires < ?", (tx.now - EXPIRED_LEASE_KEEP,))
        tx.q("DELETE FROM hil_lost WHERE taken_at < ?", (tx.now - LOST_KEEP,))
        tx.q("DELETE FROM hil_tickets WHERE expires < ?", (tx.now - TICKET_KEEP,))
        healthsql.collect_garbage(tx)
        attemptsql.collect_garbage(tx)

    def renew(self, lease_id: str, ttl: float | None = None) -> Lease:
        if ttl is not None:
            _check_ttl(ttl)
        with self._lock, self._transaction(write=True) as tx:
            return self._renew(tx, self._held(tx, lease_id), ttl)

    def fence(self, lease_id: str, token: int) -> Lease:
        with self._lock, self._transaction(write=True) as tx:
            return self._fence(tx, lease_id, token)

    def _held(self, tx: Tx, lease_id: str) -> _LeaseRow:
        """The lease's row; ``LeaseLost`` naming the new holder when it is gone."""
        found = tx.q(f"SELECT {LEASE_COLUMNS} FROM hil_leases WHERE id = ?", (lease_id,))
        if not found:
            raise LeaseLost(self._lost_message(tx, lease_id))
        return _lease(found[0])

    def _fence(self, tx: Tx, lease_id: str, token: int) -> Lease:
        """Check inside ``tx`` that ``lease_id`` is held with ``token``, renewing it if it
        expired with nobody taking it over; ``LeaseLost`` otherwise."""
        row = self._held(tx, lease_id)
        if row.lease.token != token:
            raise LeaseLost(fencesql.stale(lease_id, row.lease.pair, token, row.lease.token))
        return self._renew(tx, row, None) if row.expires_ts <= tx.now else row.lease

    def _renew(self, tx: Tx, old: _LeaseRow, ttl: float | None) -> Lease:
        if old.expires_ts <= tx.now:
            # Nobody took the hosts since it expired: nothing was lost.
            log.warning("renewing %s after it expired (nobody took it over)", old.lease)
        ttl = old.lease.ttl if ttl is None else ttl
        tx.q(
            "UPDATE hil_leases SET expires = ?, ttl = ? WHERE id = ?",
            (tx.now + ttl, ttl, old.lease.id),
        )
        return replace(old.lease, expires=utc(tx.now + ttl), ttl=ttl)

    def _lost_message(self, tx: Tx, lease_id: str) -> str:
        rows = tx.q(
            "SELECT pair, expired, taken_by, taker, taken_at FROM hil_lost WHERE lease_id = ?",
            (lease_id,),
        )
        if not rows:
            return (
                f"lease {lease_id} is unknown to store {self.url}: it was released, "
                "or expired long ago; reserve the pair again"
            )
        pair, expired, taken_by, taker, taken_at = rows[0]
        return (
            f"lease {lease_id} on pair {pair} expired at {utc(expired):%H:%M:%S} UTC "
            f"(heartbeat missed) and was taken over at {utc(taken_at):%H:%M:%S} UTC by "
            f"{taker} (lease {taken_by}); stop using its hosts and reserve again"
        )

    def release(self, lease_id: str) -> None:
        with self._lock, self._transaction(write=True) as tx:
            tx.q("DELETE FROM hil_leases WHERE id = ?", (lease_id,))

    def get(self, lease_id: str) -> Lease:
        with self._lock, self._transaction(write=False) as tx:
            found = tx.q(f"SELECT {LEASE_COLUMNS} FROM hil_leases WHERE id = ?", (lease_id,))
            if not found:
                raise InputError(self._lost_message(tx, lease_id))
            return _lease(found[0]).lease

    def leases(self) -> list[Lease]:
        with self._lock, self._transaction(write=False) as tx:
            rows = tx.q(
                f"SELECT {LEASE_COLUMNS} FROM hil_leases WHERE expires > ? ORDER BY acquired",
                (tx.now,),
            )
            return [_lease(r).lease for r in rows]

    # -- the wait queue ---------------------------------------------------

    def enqueue(self, claims: Sequence[Claim], holder: Holder, ttl: float) -> str:
        ticket = _new_id()
        with self._lock, self._transaction(write=True) as tx:
            self._insert_ticket(tx, ticket, claims, holder, ttl)
        return ticket

    def _insert_ticket(
        self, tx: Tx, ticket: str, claims: Sequence[Claim], holder: Holder, ttl: float
    ) -> int:
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

    def _touch_ticket(
        self, tx: Tx, ticket: str, claims: Sequence[Claim], holder: Holder, ttl: float
    ) -> int:
        """Renew our ticket and return its place; rejoin at the back if it is gone."""
        rows = tx.q("SELECT seq, expires FROM hil_tickets WHERE id = ?", (ticket,))
        if not rows:
            log.warning("wait ticket %s had expired; rejoining the queue at the back", ticket)
            return self._insert_ticket(tx, ticket, claims, holder, ttl)
        seq, expires = rows[0]
        # Renew only past half its life: a poll that writes nothing commits
        # without a disk flush, and waiters poll often.
        if expires - tx.now < ttl / 2:
            tx.q("UPDATE hil_tickets SET expires = ? WHERE id = ?", (tx.now + ttl, ticket))
        return int(seq)

    def _queued_hosts(self, tx: Tx, seq: int | None, ticket: str | None) -> set[str]:
        """Hosts that live tickets ahead of us wait for (all of them, without a ticket)."""
        rows = tx.q("SELECT id, seq, claims FROM hil_tickets WHERE expires > ?", (tx.now,))
        hosts: set[str] = set()
        for id_, other_seq, claims in rows:
            if id_ != ticket and (seq is None or other_seq < seq):
                hosts.update(h for _, a, b in json.loads(claims) for h in (a, b))
        return hosts

    def dequeue(self, ticket: str) -> None:
        with self._lock, self._transaction(write=True) as tx:
            tx.q("DELETE FROM hil_tickets WHERE id = ?", (ticket,))

    def tickets(self) -> list[Ticket]:
        with self._lock, self._transaction(write=False) as tx:
            rows = tx.q(
                f"SELECT {TICKET_COLUMNS} FROM hil_tickets WHERE expires > ? ORDER BY seq",
                (tx.now,),
            )
            return [_ticket(r) for r in rows]

    # -- restore journal --------------------------------------------------

    def journal_add(
        self, host: str, lease_id: str, entry: dict[str, Any], token: int | None = None
    ) -> int:
        text = json.dumps(entry)
        with self._lock, self._transaction(write=True) as tx:
            if token is not None:
                self._fence(tx, lease_id, token)
            rows = tx.q(
                "INSERT INTO hil_journal (host, lease_id, created, entry)"
                " VALUES (?, ?, ?, ?) RETURNING id",
                (host, lease_id, tx.now, text),
            )
            return int(rows[0][0])

    def journal_entries(self, host: str) -> list[JournalEntry]:
        with self._lock, self._transaction(write=False) as tx:
            rows = tx.q(
                "SELECT id, host, lease_id, created, entry FROM hil_journal"
                " WHERE host = ? ORDER BY id",
                (host,),
            )
        return [JournalEntry(int(i), h, lid, utc(c), json.loads(e)) for i, h, lid, c, e in rows]

    def journal_remove(self, entry_id: int) -> None:
        with self._lock, self._transaction(write=True) as tx:
            tx.q("DELETE FROM hil_journal WHERE id = ?", (entry_id,))

    # -- host health ------------------------------------------------------

    def record_host_failure(self, host: str, kind: str, detail: str) -> HostHealth:
        with self._lock, self._transaction(write=True) as tx:
            return healthsql.record_failure(tx, host, kind, detail)

    def record_health_check_passed(self, host: str, detail: str = "") -> HostHealth:
        with self._lock, self._transaction(write=True) as tx:
            return healthsql.record_passed(tx, host, detail)

    def quarantine_host(self, host: str, reason: str) -> HostHealth:
        with self._lock, self._transaction(write=True) as tx:
            return healthsql.quarantine(tx, host, reason)

    def release_host(self, host: str) -> HostHealth:
        with self._lock, self._transaction(write=True) as tx:
            return healthsql.release(tx, host)

    def host_health(self, hosts: Sequence[str] | None = None) -> list[HostHealth]:
        with self._lock, self._transaction(write=False) as tx:
            if hosts is None:
                return healthsql.all_known(tx)
            return [healthsql.get(tx, h) for h in hosts]

    def host_history(self, host: str, limit: int = 20) -> list[HealthRecord]:
        with self._lock, self._transaction(write=False) as tx:
            return healthsql.history(tx, host, limit)

    def quarantine_after(self) -> int:
        with self._lock, self._transaction(write=False) as tx:
            return healthsql.quarantine_after(tx)

    def set_quarantine_after(self, count: int) -> None:
        with self._lock, self._transaction(write=True) as tx:
            healthsql.set_quarantine_after(tx, count)

    # -- attempt markers --------------------------------------------------

    def begin_attempt(self, test: str, pair: str, hosts: tuple[str, str], lease_id: str) -> int:
        with self._lock, self._transaction(write=True) as tx:
            return attemptsql.begin(tx, test, pair, hosts, lease_id)

    def end_attempt(self, attempt_id: int, outcome: str) -> None:
        with self._lock, self._transaction(write=True) as tx:
            attemptsql.end(tx, attempt_id, outcome)

    def attempts(
        self,
        *,
        hosts: Sequence[str] | None = None,
        unfinished: bool | None = None,
        outcome: str | None = None,
        limit: int = 100,
    ) -> list[Attempt]:
        with self._lock, self._transaction(write=False) as tx:
            return attemptsql.query(tx, hosts, unfinished, outcome, limit)


def _check_ttl(ttl: float) -> None:
    if not ttl > 0:
        raise InputError(f"lease TTL must be a positive number of seconds, got {ttl}")
