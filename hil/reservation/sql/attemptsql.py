"""Attempt markers in the SQL stores (:mod:`hil.reservation.attempt`).

Each function runs inside a transaction of :class:`SqlStore`; the writers
inside a write transaction (the store-wide lock is held).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Any

from hil.errors import InputError
from hil.reservation.attempt import Attempt
from hil.reservation.model import Claim, Holder, utc
from hil.reservation.sqltx import Tx

log = logging.getLogger(__name__)

# Markers older than this are dropped, ended or not (a nightly's quarter of a year).
ATTEMPT_KEEP = 90 * 86400.0

_COLUMNS = "id, test, pair, host_a, host_b, lease_id, holder, started, ended, outcome"


def schema(id_column: str) -> list[str]:
    """The attempts table (added to an existing store on open: CREATE ... IF NOT EXISTS)."""
    return [
        f"CREATE TABLE IF NOT EXISTS hil_attempts (id {id_column}, test TEXT NOT NULL,"
        " pair TEXT NOT NULL, host_a TEXT NOT NULL, host_b TEXT NOT NULL,"
        " lease_id TEXT NOT NULL, holder TEXT NOT NULL, started DOUBLE PRECISION NOT NULL,"
        " ended DOUBLE PRECISION, outcome TEXT)",
        "CREATE INDEX IF NOT EXISTS hil_attempts_started ON hil_attempts (started)",
    ]


def _row(row: tuple[Any, ...]) -> Attempt:
    id_, test, pair, a, b, lease_id, holder, started, ended, outcome = row
    return Attempt(
        int(id_),
        str(test),
        str(pair),
        (str(a), str(b)),
        str(lease_id),
        str(holder),
        utc(started),
        None if ended is None else utc(ended),
        None if outcome is None else str(outcome),
    )


def _holder_text(tx: Tx, lease_id: str) -> str:
    """The lease holder's text; this process's when the store does not know the lease."""
    rows = tx.q("SELECT holder FROM hil_leases WHERE id = ?", (lease_id,))
    holder = Holder.from_json(json.loads(rows[0][0])) if rows else Holder.current()
    return str(holder)


def begin(tx: Tx, test: str, pair: str, hosts: tuple[str, str], lease_id: str) -> int:
    """Open a marker for ``test`` on ``pair``; returns its id."""
    Claim(pair, hosts)  # InputError for a pair without a name or two hosts
    if not test.strip() or not lease_id:
        raise InputError(f"an attempt needs a test and a lease id, got {test!r}, {lease_id!r}")
    rows = tx.q(
        "INSERT INTO hil_attempts (test, pair, host_a, host_b, lease_id, holder, started)"
        " VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id",
        (test, pair, *hosts, lease_id, _holder_text(tx, lease_id), tx.now),
    )
    return int(rows[0][0])


def end(tx: Tx, attempt_id: int, outcome: str) -> None:
    """Close marker ``attempt_id`` with ``outcome``; one already closed keeps its first."""
    if not outcome.strip():
        raise InputError(f"ending attempt {attempt_id} needs an outcome (passed, failed, ...)")
    rows = tx.q("SELECT ended, outcome FROM hil_attempts WHERE id = ?", (attempt_id,))
    if not rows:
        raise InputError(
            f"attempt {attempt_id} is unknown to the store: never begun, or older than "
            f"{ATTEMPT_KEEP / 86400:g} days"
        )
    if rows[0][0] is not None:
        log.warning(
            "attempt %d ended already (%s); not recording %r", attempt_id, rows[0][1], outcome
        )
        return
    tx.q(
        "UPDATE hil_attempts SET ended = ?, outcome = ? WHERE id = ?",
        (tx.now, outcome, attempt_id),
    )


def query(
    tx: Tx,
    hosts: Sequence[str] | None,
    unfinished: bool | None,
    outcome: str | None,
    limit: int,
) -> list[Attempt]:
    """Markers matching every filter given, newest first, at most ``limit``."""
    if limit < 1:
        raise InputError(f"an attempt query's limit must be at least 1, got {limit}")
    where: list[str] = []
    params: list[Any] = []
    if hosts is not None:
        if not hosts:
            return []
        marks = ", ".join("?" for _ in hosts)
        where.append(f"(host_a IN ({marks}) OR host_b IN ({marks}))")
        params += [*hosts, *hosts]
    if unfinished is not None:
        where.append("ended IS NULL" if unfinished else "ended IS NOT NULL")
    if outcome is not None:
        where.append("outcome = ?")
        params.append(outcome)
    sql = f"SELECT {_COLUMNS} FROM hil_attempts"
    if where:
        sql += " WHERE " + " AND ".join(where)
    rows = tx.q(f"{sql} ORDER BY id DESC LIMIT ?", (*params, limit))
    return [_row(r) for r in rows]


def collect_garbage(tx: Tx) -> None:
    """Drop markers older than ``ATTEMPT_KEEP``."""
    tx.q("DELETE FROM hil_attempts WHERE started < ?", (tx.now - ATTEMPT_KEEP,))
