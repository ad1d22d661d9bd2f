"""The reservation logic both SQL stores share.

Every change runs in one transaction that holds the store-wide write lock
(SQLite's ``BEGIN IMMEDIATE``, a PostgreSQL advisory transaction lock), reads
the few rows it needs, decides in Python and writes.  Serializing all writers
is what makes "two leases never hold one host" easy to see correct, and the
tables stay tiny (one row per live lease or waiter), so it costs nothing.

Time is seconds since the epoch from the store's clock (``Tx.now``): the
local wall clock for SQLite, the server's for PostgreSQL, so several CI
machines sharing a server agree on expiry.

The rules are in one module per table family, each a set of functions on an
open transaction: leases (``leasesql``, with fencing tokens in ``fencesql``),
the wait queue (``ticketsql``), host health (``healthsql``), attempt markers
(``attemptsql``); this class holds the lock and opens the transactions.
"""

from __future__ import annotations

import abc
import json
import threading
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any

from hil.errors import InputError, StoreError
from hil.reservation.attempt import Attempt
from hil.reservation.health import HealthRecord, HostHealth
from hil.reservation.model import Claim, Holder, JournalEntry, Lease, Ticket, utc
from hil.reservation.sql import attemptsql, healthsql, leasesql, sqlschema, ticketsql
from hil.reservation.sqltx import Tx
from hil.reservation.store import Store


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
            return leasesql.acquire(tx, claims, holder, ttl, ticket, ticket_ttl)

    def renew(self, lease_id: str, ttl: float | None = None) -> Lease:
        if ttl is not None:
            _check_ttl(ttl)
        with self._lock, self._transaction(write=True) as tx:
            return leasesql.renew(tx, leasesql.held(tx, lease_id, self.url), ttl)

    def fence(self, lease_id: str, token: int) -> Lease:
        with self._lock, self._transaction(write=True) as tx:
            return leasesql.fence(tx, lease_id, token, self.url)

    def release(self, lease_id: str) -> None:
        with self._lock, self._transaction(write=True) as tx:
            leasesql.release(tx, lease_id)

    def get(self, lease_id: str) -> Lease:
        with self._lock, self._transaction(write=False) as tx:
            row = leasesql.find(tx, lease_id)
            if row is None:
                raise InputError(leasesql.lost_message(tx, lease_id, self.url))
            return row.lease

    def leases(self) -> list[Lease]:
        with self._lock, self._transaction(write=False) as tx:
            return leasesql.live(tx)

    # -- the wait queue ---------------------------------------------------

    def enqueue(self, claims: Sequence[Claim], holder: Holder, ttl: float) -> str:
        ticket = leasesql.new_id()
        with self._lock, self._transaction(write=True) as tx:
            ticketsql.insert(tx, ticket, claims, holder, ttl)
        return ticket

    def dequeue(self, ticket: str) -> None:
        with self._lock, self._transaction(write=True) as tx:
            ticketsql.remove(tx, ticket)

    def tickets(self) -> list[Ticket]:
        with self._lock, self._transaction(write=False) as tx:
            return ticketsql.live(tx)

    # -- restore journal --------------------------------------------------

    def journal_add(
        self, host: str, lease_id: str, entry: dict[str, Any], token: int | None = None
    ) -> int:
        text = json.dumps(entry)
        with self._lock, self._transaction(write=True) as tx:
            if token is not None:
                leasesql.fence(tx, lease_id, token, self.url)
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
