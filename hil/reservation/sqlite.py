"""The embedded store: one SQLite file shared by the runs of one machine."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from hil.errors import StoreError
from hil.reservation.sqlstore import SqlStore
from hil.reservation.sqltx import Tx


class _SqliteTx:
    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn
        # Wall clock, read once the write lock is held: leases are local here.
        self.now = time.time()

    def q(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return [tuple(r) for r in self._conn.execute(sql, tuple(params)).fetchall()]


class SqliteStore(SqlStore):
    """Leases in a SQLite file (WAL mode); safe across processes of one machine."""

    def __init__(self, path: Path, timeout: float = 10.0) -> None:
        super().__init__()
        self.path = Path(path)
        self.url = str(self.path)
        self.timeout = timeout
        self._conn = self._connect()
        self._create_tables("INTEGER PRIMARY KEY AUTOINCREMENT")

    def _connect(self) -> sqlite3.Connection:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # isolation_level=None: we issue BEGIN IMMEDIATE ourselves, so the
            # write lock is taken before anything is read.
            conn = sqlite3.connect(
                self.path, timeout=self.timeout, isolation_level=None, check_same_thread=False
            )
        except (OSError, sqlite3.Error) as e:
            raise self._error("cannot open", e) from e
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            # NORMAL is safe against a crashed or killed process in WAL mode;
            # only a power loss may drop the last commits, along with the
            # machine's runs that held them.
            conn.execute("PRAGMA synchronous=NORMAL")
        except sqlite3.Error as e:
            conn.close()
            raise self._error("cannot open", e) from e
        return conn

    def _error(self, doing: str, e: Exception) -> StoreError:
        hint = "check the path is a writable file in a writable directory (--store or HIL_STORE)"
        if isinstance(e, sqlite3.Error) and e.sqlite_errorcode == sqlite3.SQLITE_FULL:
            hint = (
                f"the file system of {self.path} is full; free space there (what could not "
                "be written was not done, and the journal keeps every change already made)"
            )
        elif "locked" in str(e) or "busy" in str(e):
            hint = (
                f"another process held it locked for more than {self.timeout:g} s; "
                "retry, or look for a stuck hil process"
            )
        return StoreError(f"reservation store {self.path}: {doing}: {e}; {hint}")

    @contextmanager
    def _transaction(self, write: bool) -> Iterator[_SqliteTx]:
        try:
            self._conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
        except sqlite3.Error as e:
            raise self._error("cannot start a transaction", e) from e
        try:
            yield _SqliteTx(self._conn)
            self._conn.execute("COMMIT")
        except sqlite3.Error as e:
            self._rollback()
            raise self._error("query failed", e) from e
        except BaseException:
            self._rollback()
            raise

    def _rollback(self) -> None:
        # SQLite may have rolled back by itself (e.g. after an I/O error).
        if self._conn.in_transaction:
            self._conn.execute("ROLLBACK")

    def _columns(self, tx: Tx, table: str) -> set[str]:
        return {str(r[1]) for r in tx.q(f"PRAGMA table_info({table})")}

    def close(self) -> None:
        self._conn.close()
