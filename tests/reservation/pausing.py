"""Pausing a store client (SIGSTOP) only where it holds no store lock.

A client stopped inside a store transaction keeps the store's write lock (a
SQLite store's for as long as it is stopped, PostgreSQL's advisory lock until
the idle-in-transaction timeout), so every other client waits: tests of a
paused holder pause it between its transactions.
"""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import time

import psycopg
import pytest

from hil.reservation.postgres import LOCK_KEY


def _store_is_free(store_url: str) -> bool:
    """Whether nobody holds the store's write lock (SQLite's, or the advisory lock)."""
    if store_url.startswith("postgresql"):
        with psycopg.connect(store_url, autocommit=True) as pg:
            row = pg.execute("SELECT pg_try_advisory_lock(%s)", (LOCK_KEY,)).fetchone()
            assert row is not None
            if row[0]:
                pg.execute("SELECT pg_advisory_unlock(%s)", (LOCK_KEY,))
            return bool(row[0])
    db = sqlite3.connect(store_url, timeout=0.2, isolation_level=None)
    try:
        db.execute("BEGIN IMMEDIATE")
        db.execute("ROLLBACK")
        return True
    except sqlite3.OperationalError:
        return False
    finally:
        db.close()


def pause_outside_the_store(proc: subprocess.Popen[str], store_url: str) -> None:
    """SIGSTOP ``proc``, again until it is not stopped inside a store transaction.

    A holder stopped inside its heartbeat's transaction would keep the store's
    write lock (a SQLite store's for good): that is another test's case.
    """
    for _ in range(20):
        proc.send_signal(signal.SIGSTOP)
        if _store_is_free(store_url):
            return
        proc.send_signal(signal.SIGCONT)
        time.sleep(0.05)
    pytest.fail(f"the holder was inside a store transaction at each of 20 pauses ({store_url})")
