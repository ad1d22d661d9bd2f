"""The reservation store interface, and ``open_store`` to pick one by URL."""

from __future__ import annotations

import abc
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hil.errors import StoreError
from hil.reservation.model import Claim, Holder, JournalEntry, Lease, Ticket


class Store(abc.ABC):
    """Where leases, the wait queue and host restore journals live.

    Every method is one short, bounded transaction; a store is safe to share
    between threads.  Failures of the store itself raise ``StoreError``.
    """

    url: str  # for messages; any password is redacted

    @abc.abstractmethod
    def try_acquire(
        self,
        claims: Sequence[Claim],
        holder: Holder,
        ttl: float,
        ticket: str | None = None,
        ticket_ttl: float = 5.0,
    ) -> Lease | None:
        """Take the first claim whose two hosts are free, or None.

        Hosts held by expired leases are taken over.  A claim is not taken
        when an older live ticket waits for one of its hosts; ``ticket`` is the
        caller's own place in the queue (renewed for ``ticket_ttl`` seconds,
        removed when a lease is taken).
        """

    @abc.abstractmethod
    def renew(self, lease_id: str, ttl: float | None = None) -> Lease:
        """Push the lease's expiry to now + ttl (default: its own ttl).

        An expired lease that nobody took over is renewed.  Raises
        ``LeaseLost`` naming the new holder when it was taken over, or when
        the store does not know it.
        """

    @abc.abstractmethod
    def release(self, lease_id: str) -> None:
        """Give the lease's hosts back; releasing twice is fine."""

    @abc.abstractmethod
    def get(self, lease_id: str) -> Lease:
        """The lease, live or expired; ``InputError`` when unknown."""

    @abc.abstractmethod
    def leases(self) -> list[Lease]:
        """Every live (not expired) lease, oldest first."""

    @abc.abstractmethod
    def enqueue(self, claims: Sequence[Claim], holder: Holder, ttl: float) -> str:
        """Join the wait queue for any of ``claims``; returns the ticket id."""

    @abc.abstractmethod
    def dequeue(self, ticket: str) -> None:
        """Leave the wait queue; idempotent."""

    @abc.abstractmethod
    def tickets(self) -> list[Ticket]:
        """Every live ticket, in queue order."""

    @abc.abstractmethod
    def journal_add(self, host: str, lease_id: str, entry: dict[str, Any]) -> int:
        """Record a restore-journal entry for ``host``; returns its id."""

    @abc.abstractmethod
    def journal_entries(self, host: str) -> list[JournalEntry]:
        """The host's journal entries, oldest first."""

    @abc.abstractmethod
    def journal_remove(self, entry_id: int) -> None:
        """Forget one journal entry; idempotent."""

    @abc.abstractmethod
    def close(self) -> None:
        """Close the connection; the store is unusable afterwards."""

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def default_path() -> Path:
    """``$XDG_STATE_HOME/hil/reservations.db``, or under ``~/.local/state``."""
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "hil" / "reservations.db"


_PASSWORD_IN_URL = re.compile(r"(://[^:/@]*:)([^@]*)(@)")
_PASSWORD_PARAM = re.compile(r"(password=)([^&\s]*)", re.IGNORECASE)


def redact(url: str) -> str:
    """``url`` with any password replaced by ``***``, fit for messages."""
    return _PASSWORD_PARAM.sub(r"\1***", _PASSWORD_IN_URL.sub(r"\1***\3", url))


def open_store(url: str | None, timeout: float = 10.0) -> Store:
    """The store at ``url``: None for the default SQLite file, a path for a
    SQLite file there, ``postgresql://`` (or ``postgres://``) for PostgreSQL.

    ``timeout`` bounds connecting and every operation, in seconds.
    """
    if url is None or url == "":
        from hil.reservation.sqlite import SqliteStore

        return SqliteStore(default_path(), timeout=timeout)
    if url.startswith(("postgresql://", "postgres://")):
        from hil.reservation.postgres import PostgresStore

        return PostgresStore(url, timeout=timeout)
    if re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://", url):
        raise StoreError(
            f"unsupported reservation store {redact(url)!r}: give a SQLite file path "
            "or a postgresql:// URL (--store or HIL_STORE)"
        )
    from hil.reservation.sqlite import SqliteStore

    return SqliteStore(Path(url).expanduser(), timeout=timeout)
