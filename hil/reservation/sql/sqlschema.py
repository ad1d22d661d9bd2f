"""The SQL stores' tables, and the migrations that bring an older store up to date.

Both run on every open, inside one write transaction (so two runners opening
an old store at once migrate it once).  Tables are only ever added (``CREATE
... IF NOT EXISTS``) and columns only ever added with a default, so a store
made by an earlier version keeps its rows and older runners keep working.
"""

from __future__ import annotations

from collections.abc import Callable

from hil.reservation.sql import attemptsql, healthsql
from hil.reservation.sqltx import Tx

# ``columns(tx, table)``: the names of ``table``'s columns (each driver asks its catalogue).
Columns = Callable[[Tx, str], set[str]]

# Columns added after a table was first released: (table, column, its DDL).
ADDED_COLUMNS: tuple[tuple[str, str, str], ...] = (
    # Fencing tokens (see hil.reservation.sql.fencesql); leases of an older store get 0.
    ("hil_leases", "token", "BIGINT NOT NULL DEFAULT 0"),
)


def schema(id_column: str) -> list[str]:
    """The DDL both stores run on every open; ``id_column`` is the auto-increment key type."""
    return [
        "CREATE TABLE IF NOT EXISTS hil_leases (id TEXT PRIMARY KEY, pair TEXT NOT NULL,"
        " host_a TEXT NOT NULL, host_b TEXT NOT NULL, holder TEXT NOT NULL,"
        " acquired DOUBLE PRECISION NOT NULL, expires DOUBLE PRECISION NOT NULL,"
        " ttl DOUBLE PRECISION NOT NULL, token BIGINT NOT NULL DEFAULT 0)",
        # Leases that were taken over, so that their holder learns by whom.
        "CREATE TABLE IF NOT EXISTS hil_lost (lease_id TEXT PRIMARY KEY, pair TEXT NOT NULL,"
        " expired DOUBLE PRECISION NOT NULL, taken_by TEXT NOT NULL, taker TEXT NOT NULL,"
        " taken_at DOUBLE PRECISION NOT NULL)",
        "CREATE TABLE IF NOT EXISTS hil_tickets (id TEXT PRIMARY KEY, seq BIGINT NOT NULL,"
        " claims TEXT NOT NULL, holder TEXT NOT NULL, created DOUBLE PRECISION NOT NULL,"
        " expires DOUBLE PRECISION NOT NULL)",
        f"CREATE TABLE IF NOT EXISTS hil_journal (id {id_column}, host TEXT NOT NULL,"
        " lease_id TEXT NOT NULL, created DOUBLE PRECISION NOT NULL, entry TEXT NOT NULL)",
        "CREATE INDEX IF NOT EXISTS hil_journal_host ON hil_journal (host, id)",
        *healthsql.schema(id_column),
        *attemptsql.schema(id_column),
    ]


def create(tx: Tx, id_column: str, columns: Columns) -> None:
    """Create what is missing: tables, then the columns added since a table was made."""
    for ddl in schema(id_column):
        tx.q(ddl)
    for table, column, ddl in ADDED_COLUMNS:
        if column not in columns(tx, table):
            tx.q(f"ALTER TABLE {table} ADD COLUMN {column} {ddl}")
