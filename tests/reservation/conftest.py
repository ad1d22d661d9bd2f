"""Stores for the reservation tests: SQLite in tmp_path, and a real PostgreSQL.

PostgreSQL is the server at ``HIL_TEST_PG_URL`` when set, else a private
cluster this session starts (and removes) with Debian's server binaries.
Each test gets an empty database of its own.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from hil.reservation import Store, open_store
from hil.reservation.pgcluster import private_cluster, scratch_database

HERE = Path(__file__).parent
CONTENDER = HERE / "contender.py"

STORE_KINDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


@pytest.fixture(scope="session")
def pg_server() -> Iterator[str]:
    """The URL of a PostgreSQL server the tests may create databases on."""
    given = os.environ.get("HIL_TEST_PG_URL")
    if given:
        yield given
        return
    with private_cluster() as url:
        yield url


@pytest.fixture
def pg_url(pg_server: str) -> Iterator[str]:
    """A fresh, empty database on the test server."""
    with scratch_database(pg_server) as url:
        yield url


@pytest.fixture(params=STORE_KINDS)
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """An empty store of each kind, as the URL ``open_store`` takes."""
    if request.param == "sqlite":
        return str(tmp_path / "reservations.db")
    return str(request.getfixturevalue("pg_url"))


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    """An open, empty store of each kind."""
    s = open_store(store_url)
    yield s
    s.close()


@pytest.fixture
def spawn() -> Iterator[Callable[..., subprocess.Popen[str]]]:
    """Start ``contender.py ARGS`` with pipes; any still running at the end are killed."""
    procs: list[subprocess.Popen[str]] = []

    def start(*args: str) -> subprocess.Popen[str]:
        p = subprocess.Popen(
            [sys.executable, str(CONTENDER), *args],
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        procs.append(p)
        return p

    yield start
    for p in procs:
        if p.poll() is None:
            p.kill()
        p.communicate(timeout=10)
