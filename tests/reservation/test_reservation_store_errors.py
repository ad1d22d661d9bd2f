"""A failing store says which store, what failed and what to do, quickly."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import psycopg
import pytest

from hil.errors import StoreError
from hil.reservation import Claim, Holder, open_store, redact
from hil.reservation.postgres import LOCK_KEY, PostgresStore
from hil.reservation.sqlite import SqliteStore

AB = Claim("ab", ("a", "b"))


def test_unreachable_postgres_fails_fast_without_the_password() -> None:
    started = time.monotonic()
    with pytest.raises(StoreError) as e:
        open_store("postgresql://hil:s3cret@127.0.0.1:1/lab")
    assert time.monotonic() - started < 5
    text = str(e.value)
    assert "s3cret" not in text
    assert "postgresql://hil:***@127.0.0.1:1/lab" in text
    assert "Connection refused" in text and "check the server runs" in text


def test_malformed_postgres_url() -> None:
    with pytest.raises(StoreError, match=r"invalid integer value \"notaport\".*\(--store"):
        open_store("postgresql://hil:s3cret@127.0.0.1:notaport/lab")


def test_unknown_store_scheme() -> None:
    with pytest.raises(
        StoreError,
        match=r"'mysql://u:\*\*\*@db/x'.*SQLite file path or a "
        r"postgresql:// URL",
    ):
        open_store("mysql://u:pw@db/x")


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://u:pw@h/db",
        "postgresql://h/db?password=pw&sslmode=require",
    ],
)
def test_redact_hides_passwords(url: str) -> None:
    assert "pw" not in redact(url).replace("postgresql", "")


def test_sqlite_path_that_is_a_directory(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match=f"{tmp_path}: cannot open: .*writable file"):
        open_store(str(tmp_path))


def test_sqlite_path_under_a_file(tmp_path: Path) -> None:
    (tmp_path / "plain").write_text("")
    with pytest.raises(StoreError, match=r"plain/r\.db: cannot open"):
        open_store(str(tmp_path / "plain" / "r.db"))


def test_sqlite_default_path_follows_xdg_state_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    with open_store(None) as store:
        assert store.url == str(tmp_path / "hil" / "reservations.db")
    assert (tmp_path / "hil" / "reservations.db").exists()


def test_sqlite_locked_too_long(tmp_path: Path) -> None:
    path = tmp_path / "r.db"
    with SqliteStore(path, timeout=0.2) as store:
        blocker = sqlite3.connect(path, isolation_level=None)
        blocker.execute("BEGIN IMMEDIATE")
        try:
            with pytest.raises(StoreError, match=f"{path}: .*locked.* more than 0.2 s"):
                store.try_acquire([AB], Holder.current(), 30)
        finally:
            blocker.execute("ROLLBACK")
            blocker.close()
        assert store.try_acquire([AB], Holder.current(), 30) is not None


@pytest.mark.postgres
def test_postgres_lock_held_too_long(pg_url: str) -> None:
    with (
        PostgresStore(pg_url, timeout=0.3) as store,
        psycopg.connect(pg_url, autocommit=True) as blocker,
    ):
        with blocker.transaction():
            blocker.execute("SELECT pg_advisory_xact_lock(%s)", (LOCK_KEY,))
            with pytest.raises(StoreError, match=r"did not answer within 0\.3 s"):
                store.try_acquire([AB], Holder.current(), 30)
        # The store recovers once the lock is free.
        assert store.try_acquire([AB], Holder.current(), 30) is not None


@pytest.mark.postgres
def test_postgres_store_reconnects_after_losing_its_connection(pg_url: str) -> None:
    with PostgresStore(pg_url) as store, psycopg.connect(pg_url, autocommit=True) as admin:
        lease = store.try_acquire([AB], Holder.current(), 30)
        assert lease is not None
        admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        # The connection broke while idle: it is replaced before the call runs anything.
        assert store.renew(lease.id).id == lease.id
        assert [le.id for le in store.leases()] == [lease.id]
