"""A private, throwaway PostgreSQL server, for the store's tests and benchmark.

It runs Debian's server binaries from a temporary directory, listening on
127.0.0.1 on a free port, with trust authentication for the ``hil`` role.
As root it runs them as the ``postgres`` user, since PostgreSQL refuses to
run as root.
"""

from __future__ import annotations

import contextlib
import glob
import os
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import psycopg

from hil import tools
from hil.errors import StoreError

TIMEOUT = 60.0
INITDB, PG_CTL = tools.name("initdb"), tools.name("pg_ctl")  # in Debian's versioned bindir
# Durability is pointless in a throwaway cluster; without it tests run faster.
FAST_SETTINGS = ("fsync = off", "synchronous_commit = off", "full_page_writes = off")


def find_bindir() -> Path:
    """The newest ``/usr/lib/postgresql/<version>/bin`` that has ``initdb``."""
    pattern = tools.tool("initdb").path
    assert pattern is not None  # the table says where Debian puts the server binaries
    found = glob.glob(pattern)
    if not found:
        raise StoreError(
            "PostgreSQL server binaries not found under /usr/lib/postgresql: "
            "install the Debian package postgresql (ci/install does)"
        )
    return Path(max(found, key=lambda p: int(Path(p).parts[-3]))).parent


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _run(argv: list[str], what: str) -> None:
    try:
        subprocess.run(argv, check=True, capture_output=True, text=True, timeout=TIMEOUT)
    except subprocess.CalledProcessError as e:
        raise StoreError(f"private PostgreSQL: {what} failed: {e.stderr.strip()}") from e
    except subprocess.TimeoutExpired as e:
        raise StoreError(f"private PostgreSQL: {what} took more than {TIMEOUT:g} s") from e


@contextlib.contextmanager
def private_cluster(fast: bool = True) -> Iterator[str]:
    """Start a server; yield its URL; stop it and delete its files at the end.

    ``fast`` turns off fsync (fine for tests; the benchmark may want it on).
    """
    bindir = find_bindir()
    base = Path(tempfile.mkdtemp(prefix="hil-pg-"))
    data = base / "data"
    as_postgres = tools.argv("runuser", "-u", "postgres", "--") if os.geteuid() == 0 else []
    try:
        if as_postgres:
            shutil.chown(base, "postgres", "postgres")
        _run(
            [
                *as_postgres,
                str(bindir / INITDB),
                "-D",
                str(data),
                "-U",
                "hil",
                "-A",
                "trust",
                "-E",
                "UTF8",
                "--locale=C",
                "--no-sync",
            ],
            "initdb",
        )
        port = _free_port()
        settings = [
            "listen_addresses = '127.0.0.1'",
            f"port = {port}",
            f"unix_socket_directories = '{base}'",
            *(FAST_SETTINGS if fast else ()),
        ]
        with open(data / "postgresql.conf", "a") as conf:
            conf.write("\n".join(settings) + "\n")
        _run(
            [
                *as_postgres,
                str(bindir / PG_CTL),
                "-D",
                str(data),
                "-l",
                str(base / "log"),
                "-w",
                "-t",
                str(int(TIMEOUT)),
                "start",
            ],
            "pg_ctl start",
        )
        try:
            yield f"postgresql://hil@127.0.0.1:{port}/postgres"
        finally:
            _stop(as_postgres, bindir, data)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _stop(as_postgres: list[str], bindir: Path, data: Path) -> None:
    """Stop the server; kill it if pg_ctl cannot."""
    try:
        _run(
            [
                *as_postgres,
                str(bindir / PG_CTL),
                "-D",
                str(data),
                "-m",
                "immediate",
                "-w",
                "-t",
                "30",
                "stop",
            ],
            "pg_ctl stop",
        )
    except StoreError:
        pidfile = data / "postmaster.pid"
        if pidfile.exists():
            with contextlib.suppress(ProcessLookupError, ValueError):
                os.kill(int(pidfile.read_text().split()[0]), signal.SIGKILL)
        raise


@contextlib.contextmanager
def scratch_database(url: str) -> Iterator[str]:
    """Create an empty database on the server at ``url``; yield its URL; drop it."""
    name = f"hil_scratch_{secrets.token_hex(4)}"
    with psycopg.connect(url, autocommit=True, connect_timeout=10) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield urlsplit(url)._replace(path=f"/{name}").geturl()
    finally:
        with psycopg.connect(url, autocommit=True, connect_timeout=10) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
