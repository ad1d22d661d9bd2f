"""Crash-safe reservations of lab host pairs.

A lease holds both hosts of a pair until it expires; its holder keeps it
alive with a ``Heartbeat`` and releases it at the end.  A lease not renewed
in time (holder killed, runner gone) is taken over by the next reserver.
Waiters queue first come first served.  A quarantined host (see
:mod:`hil.reservation.health`) is never handed out.  Leases live in a ``Store``: SQLite
for one machine, PostgreSQL for many; ``open_store`` picks one by URL.
See docs/reservations.md.
"""

from hil.reservation.attempt import Attempt
from hil.reservation.health import HealthRecord, HostHealth
from hil.reservation.heartbeat import Heartbeat
from hil.reservation.model import Claim, Holder, JournalEntry, Lease, Ticket
from hil.reservation.open import default_path, open_store
from hil.reservation.reserve import describe, reserve
from hil.reservation.store import Store, redact

__all__ = [
    "Attempt",
    "Claim",
    "HealthRecord",
    "Heartbeat",
    "Holder",
    "HostHealth",
    "JournalEntry",
    "Lease",
    "Store",
    "Ticket",
    "default_path",
    "describe",
    "open_store",
    "redact",
    "reserve",
]
