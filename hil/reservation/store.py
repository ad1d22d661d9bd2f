"""The reservation store interface, and ``open_store`` to pick one by URL."""

from __future__ import annotations

import abc
import re
from collections.abc import Sequence
from typing import Any

from hil.reservation.attempt import Attempt
from hil.reservation.health import HealthRecord, HostHealth
from hil.reservation.model import Claim, Holder, JournalEntry, Lease, Ticket


class Store(abc.ABC):
    """Where leases, the wait queue, host restore journals and host health live.

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
    def fence(self, lease_id: str, token: int) -> Lease:
        """Check, right before a disruptive action, that this run still holds the lease.

        Returns the lease when ``lease_id`` is held with fencing ``token``; an
        expired lease that nobody took over is renewed (as ``renew``).  Raises
        ``LeaseLost`` naming the new holder when it was taken over, or when the
        token is not the lease's.
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
    def journal_add(
        self, host: str, lease_id: str, entry: dict[str, Any], token: int | None = None
    ) -> int:
        """Record a restore-journal entry for ``host``; returns its id.

        With ``token``, the entry is recorded only if ``fence(lease_id, token)``
        passes, in the same transaction (``LeaseLost`` otherwise, nothing recorded).
        """

    @abc.abstractmethod
    def journal_entries(self, host: str) -> list[JournalEntry]:
        """The host's journal entries, oldest first."""

    @abc.abstractmethod
    def journal_remove(self, entry_id: int) -> None:
        """Forget one journal entry; idempotent."""

    @abc.abstractmethod
    def record_host_failure(self, host: str, kind: str, detail: str) -> HostHealth:
        """Count an infrastructure failure of ``host`` (``kind``: a ``FailureKind``).

        The host becomes suspect; after ``quarantine_after()`` consecutive
        failures, quarantined.  A quarantine set by hand stays as it is.
        Returns the new health; ``InputError`` for an unknown kind.
        """

    @abc.abstractmethod
    def record_health_check_passed(self, host: str, detail: str = "") -> HostHealth:
        """A health check of ``host`` passed: healthy again, the failure streak reset
        (a quarantine set by hand stays until ``release_host``)."""

    @abc.abstractmethod
    def quarantine_host(self, host: str, reason: str) -> HostHealth:
        """Quarantine ``host`` by hand until ``release_host``; ``InputError`` if no reason."""

    @abc.abstractmethod
    def release_host(self, host: str) -> HostHealth:
        """End the quarantine of ``host``: healthy; ``InputError`` when it is not quarantined."""

    @abc.abstractmethod
    def host_health(self, hosts: Sequence[str] | None = None) -> list[HostHealth]:
        """The health of ``hosts`` (healthy when never recorded), or of every recorded host."""

    @abc.abstractmethod
    def host_history(self, host: str, limit: int = 20) -> list[HealthRecord]:
        """The last ``limit`` failures and state changes of ``host``, oldest first."""

    @abc.abstractmethod
    def quarantine_after(self) -> int:
        """How many consecutive failures quarantine a host (default ``QUARANTINE_AFTER``)."""

    @abc.abstractmethod
    def set_quarantine_after(self, count: int) -> None:
        """Store the threshold for every runner of this store; ``InputError`` below 1."""

    @abc.abstractmethod
    def begin_attempt(self, test: str, pair: str, hosts: tuple[str, str], lease_id: str) -> int:
        """Record that ``test`` is being tried on ``pair`` under ``lease_id``; returns the
        marker's id.  The holder recorded is the lease's (this process's if the store
        does not know the lease).  ``InputError`` for an empty test, pair or host."""

    @abc.abstractmethod
    def end_attempt(self, attempt_id: int, outcome: str) -> None:
        """Close the marker with ``outcome`` (e.g. passed, failed, host crashed).

        Ending it again keeps the first outcome; ``InputError`` when the store
        does not know ``attempt_id`` or ``outcome`` is empty.
        """

    @abc.abstractmethod
    def attempts(
        self,
        *,
        hosts: Sequence[str] | None = None,
        unfinished: bool | None = None,
        outcome: str | None = None,
        limit: int = 100,
    ) -> list[Attempt]:
        """Markers newest first, at most ``limit``: those on any of ``hosts``, only open
        (``unfinished=True``) or only closed (False) ones, with ``outcome``, as given."""

    @abc.abstractmethod
    def close(self) -> None:
        """Close the connection; the store is unusable afterwards."""

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_PASSWORD_IN_URL = re.compile(r"(://[^:/@]*:)([^@]*)(@)")
_PASSWORD_PARAM = re.compile(r"(password=)([^&\s]*)", re.IGNORECASE)


def redact(url: str) -> str:
    """``url`` with any password replaced by ``***``, fit for messages."""
    return _PASSWORD_PARAM.sub(r"\1***", _PASSWORD_IN_URL.sub(r"\1***\3", url))
