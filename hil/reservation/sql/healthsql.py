"""Host health in the SQL stores: the state rules, one transaction each.

Each function runs inside a write transaction of :class:`SqlStore` (the
store-wide lock is held), reads the host's row, decides and writes the new
row and a history entry.  A history entry is written for every failure and
every change of state; a passing check on a healthy host writes nothing (a
cron health round would fill the history with nothing new).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, cast

from hil.errors import InputError
from hil.reservation.health import (
    FAILURE_KINDS,
    QUARANTINE_AFTER,
    HealthEvent,
    HealthRecord,
    HealthState,
    HostHealth,
)
from hil.reservation.model import utc
from hil.reservation.sqltx import Tx

# History older than this is dropped (a nightly's quarter of a year).
HISTORY_KEEP = 90 * 86400.0

_COLUMNS = "host, state, since, reason, failures, manual"
_SETTING = "quarantine_after"


def schema(id_column: str) -> list[str]:
    """The health tables (added to an existing store on open: CREATE ... IF NOT EXISTS)."""
    return [
        "CREATE TABLE IF NOT EXISTS hil_health (host TEXT PRIMARY KEY, state TEXT NOT NULL,"
        " since DOUBLE PRECISION NOT NULL, reason TEXT NOT NULL, failures INTEGER NOT NULL,"
        " manual INTEGER NOT NULL)",
        f"CREATE TABLE IF NOT EXISTS hil_health_log (id {id_column}, host TEXT NOT NULL,"
        " at DOUBLE PRECISION NOT NULL, event TEXT NOT NULL, previous TEXT NOT NULL,"
        " state TEXT NOT NULL, detail TEXT NOT NULL)",
        "CREATE INDEX IF NOT EXISTS hil_health_log_host ON hil_health_log (host, id)",
        "CREATE TABLE IF NOT EXISTS hil_settings (name TEXT PRIMARY KEY, value TEXT NOT NULL)",
    ]


def _row(row: tuple[Any, ...]) -> HostHealth:
    host, state, since, reason, failures, manual = row
    return HostHealth(
        str(host), cast(HealthState, state), utc(since), str(reason), int(failures), bool(manual)
    )


def get(tx: Tx, host: str) -> HostHealth:
    """The host's health; healthy (``since`` None) when the store never saw it."""
    rows = tx.q(f"SELECT {_COLUMNS} FROM hil_health WHERE host = ?", (host,))
    return _row(rows[0]) if rows else HostHealth(host, "healthy")


def all_known(tx: Tx) -> list[HostHealth]:
    """Every host the store has a health row for, by name."""
    return [_row(r) for r in tx.q(f"SELECT {_COLUMNS} FROM hil_health ORDER BY host")]


def quarantined(tx: Tx) -> set[str]:
    """The hosts that are quarantined now."""
    return {str(r[0]) for r in tx.q("SELECT host FROM hil_health WHERE state = 'quarantined'")}


def _save(tx: Tx, old: HostHealth, new: HostHealth, event: HealthEvent, detail: str) -> HostHealth:
    since = new.since.timestamp() if new.since else tx.now
    tx.q("DELETE FROM hil_health WHERE host = ?", (new.host,))
    tx.q(
        f"INSERT INTO hil_health ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)",
        (new.host, new.state, since, new.reason, new.failures, int(new.manual)),
    )
    tx.q(
        "INSERT INTO hil_health_log (host, at, event, previous, state, detail)"
        " VALUES (?, ?, ?, ?, ?, ?)",
        (new.host, tx.now, event, old.state, new.state, detail),
    )
    return HostHealth(new.host, new.state, utc(since), new.reason, new.failures, new.manual)


def record_failure(tx: Tx, host: str, kind: str, detail: str) -> HostHealth:
    """Count an infrastructure failure: suspect, or quarantined after the threshold."""
    if kind not in FAILURE_KINDS:
        raise InputError(f"unknown failure kind {kind!r}; known: {', '.join(FAILURE_KINDS)}")
    old = get(tx, host)
    failures = old.failures + 1
    what = f"{kind}: {detail}"
    if old.state == "quarantined" and old.manual:
        new = HostHealth(host, "quarantined", old.since, old.reason, failures, manual=True)
    elif old.state == "quarantined" or failures >= quarantine_after(tx):
        since = old.since if old.state == "quarantined" else None
        reason = f"{failures} consecutive infrastructure failures, the last {what}"
        new = HostHealth(host, "quarantined", since, reason, failures)
    else:
        since = old.since if old.state == "suspect" else None
        new = HostHealth(host, "suspect", since, what, failures)
    return _save(tx, old, new, cast(HealthEvent, kind), detail)


def record_passed(tx: Tx, host: str, detail: str) -> HostHealth:
    """A passing health check: healthy again, the streak reset; a quarantine by hand stays."""
    old = get(tx, host)
    if old.manual:
        new = replace(old, failures=0)
    else:
        new = HostHealth(host, "healthy", old.since if old.state == "healthy" else None)
    return old if new == old else _save(tx, old, new, "check_passed", detail)


def quarantine(tx: Tx, host: str, reason: str) -> HostHealth:
    """Quarantine by hand: it stays until :func:`release`."""
    reason = " ".join(reason.split())
    if not reason:
        raise InputError(f"quarantining {host} needs a reason (--reason TEXT): say why it is out")
    old = get(tx, host)
    since = old.since if old.state == "quarantined" else None
    new = HostHealth(host, "quarantined", since, reason, old.failures, manual=True)
    return _save(tx, old, new, "quarantine", reason)


def release(tx: Tx, host: str) -> HostHealth:
    """End a quarantine (by hand or not): healthy, the failure streak forgotten."""
    old = get(tx, host)
    if old.state != "quarantined":
        raise InputError(f"host {host} is not quarantined ({old}); nothing to release")
    return _save(tx, old, HostHealth(host, "healthy", None, ""), "release", old.reason)


def history(tx: Tx, host: str, limit: int) -> list[HealthRecord]:
    """The host's last ``limit`` history entries, oldest first."""
    rows = tx.q(
        "SELECT host, at, event, previous, state, detail FROM hil_health_log"
        " WHERE host = ? ORDER BY id DESC LIMIT ?",
        (host, limit),
    )
    return [
        HealthRecord(
            str(h),
            utc(at),
            cast(HealthEvent, ev),
            cast(HealthState, prev),
            cast(HealthState, st),
            str(d),
        )
        for h, at, ev, prev, st, d in reversed(rows)
    ]


def collect_garbage(tx: Tx) -> None:
    """Drop history older than ``HISTORY_KEEP``."""
    tx.q("DELETE FROM hil_health_log WHERE at < ?", (tx.now - HISTORY_KEEP,))


def quarantine_after(tx: Tx) -> int:
    """The store's threshold of consecutive failures (``QUARANTINE_AFTER`` if unset)."""
    rows = tx.q("SELECT value FROM hil_settings WHERE name = ?", (_SETTING,))
    return int(rows[0][0]) if rows else QUARANTINE_AFTER


def set_quarantine_after(tx: Tx, count: int) -> None:
    """Set the threshold (a positive number of consecutive failures)."""
    if count < 1:
        raise InputError(f"quarantine-after must be at least 1 failure, got {count}")
    tx.q("DELETE FROM hil_settings WHERE name = ?", (_SETTING,))
    tx.q("INSERT INTO hil_settings (name, value) VALUES (?, ?)", (_SETTING, str(count)))
