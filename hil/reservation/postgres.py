"""The shared store: PostgreSQL, for labs whose CI runners are many machines."""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from typing import Any

import psycopg

from hil.errors import StoreError
from hil.reservation.sqlstore import SqlStore
from hil.reservation.sqltx import Tx
from hil.reservation.store import redact

# The advisory lock that serializes every writer of the reservation tables
# (advisory locks are per database, so databases do not contend).
LOCK_KEY = 0x68696C_7265_73  # "hil" "res"


class _PgTx:
    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self._conn = conn
        # The server's clock, read after the lock, so every machine agrees.
        row = conn.execute("SELECT extract(epoch FROM clock_timestamp())::float8").fetchone()
        assert row is not None
        self.now = float(row[0])

    def q(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        cur = self._conn.execute(sql.replace("?", "%s"), tuple(params))
        return [tuple(r) for r in cur.fetchall()] if cur.description else []


class PostgresStore(SqlStore):
    """Leases in PostgreSQL tables, created on first use."""

    def __init__(self, url: str, timeout: float = 10.0) -> None:
        super().__init__()
        self._raw_url = url
        self.url = redact(url)
        self.timeout = timeout
        self._conn: psycopg.Connection[Any] | None = None
        self._create_tables("BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY")

    def _connect(self) -> psycopg.Connection[Any]:
        ms = int(self.timeout * 1000)
        try:
            conn = psycopg.connect(
                self._raw_url,
                autocommit=True,
                connect_timeout=max(2, math.ceil(self.timeout)),
                # A server that vanishes without a reset must not hang us.
                keepalives=1,
                keepalives_idle=max(1, int(self.timeout)),
                keepalives_interval=1,
                keepalives_count=3,
                tcp_user_timeout=ms,
            )
        except psycopg.Error as e:
            raise self._error("cannot connect", e) from e
        try:
            conn.execute(f"SET statement_timeout = {ms}")
            # A client frozen inside a transaction must not hold the lock forever.
            conn.execute(f"SET idle_in_transaction_session_timeout = {3 * ms}")
        except psycopg.Error as e:
            conn.close()
            raise self._error("cannot configure the session", e) from e
        return conn

    def _error(self, doing: str, e: Exception) -> StoreError:
        text = " ".join(str(e).split())
        password = re.search(r"://[^:/@]*:([^@]+)@", self._raw_url)
        if password:
            text = text.replace(password.group(1), "***")
        hint = "check the server runs and the URL (--store or HIL_STORE) is right"
        if isinstance(e, psycopg.errors.QueryCanceled):
            hint = (
                f"the store did not answer within {self.timeout:g} s, or another client "
                "holds its lock; retry, or look for a stuck hil process"
            )
        return StoreError(f"reservation store {self.url}: {doing}: {redact(text)}; {hint}")

    @contextmanager
    def _transaction(self, write: bool) -> Iterator[_PgTx]:
        try:
            with ExitStack() as stack:
                yield self._begin(stack, write)
        except psycopg.Error as e:
            raise self._error("query failed", e) from e

    def _begin(self, stack: ExitStack, write: bool) -> _PgTx:
        """Start a transaction on ``stack``.  A connection that broke while idle (the
        server restarted) is replaced once: nothing of the caller's has run on it yet."""
        try:
            return self._try_begin(stack, write)
        except psycopg.OperationalError:
            if self._conn is None or not self._conn.broken:
                raise
            return self._try_begin(stack, write)

    def _try_begin(self, stack: ExitStack, write: bool) -> _PgTx:
        if self._conn is None or self._conn.closed or self._conn.broken:
            # (Re)connect lazily, so a heartbeat survives a server restart.
            self._conn = self._connect()
        conn = self._conn
        with ExitStack() as attempt:
            attempt.enter_context(conn.transaction())
            if write:
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (LOCK_KEY,))
            tx = _PgTx(conn)
            stack.enter_context(attempt.pop_all())
        return tx

    def _columns(self, tx: Tx, table: str) -> set[str]:
        rows = tx.q(
            "SELECT column_name FROM information_schema.columns"
            " WHERE table_schema = current_schema() AND table_name = ?",
            (table,),
        )
        return {str(r[0]) for r in rows}

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
