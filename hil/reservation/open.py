"""Which store a URL names: ``open_store`` picks the driver.

Kept apart from the abstract store (:mod:`hil.reservation.store`), which
the drivers import, so that no module of the package imports one that
imports it back.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING

from hil.errors import StoreError
from hil.reservation.store import redact

if TYPE_CHECKING:
    from hil.reservation.store import Store


def default_path() -> Path:
    """``$XDG_STATE_HOME/hil/reservations.db``, or under ``~/.local/state``."""
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "hil" / "reservations.db"


def open_store(url: str | None, timeout: float = 10.0) -> Store:
    """The store at ``url``: None for the default SQLite file, a path for a
    SQLite file there, ``postgresql://`` (or ``postgres://``) for PostgreSQL.

    ``timeout`` bounds connecting and every operation, in seconds.
    """
    if url is None or url == "":
        from hil.reservation.sqlite import SqliteStore

        return SqliteStore(default_path(), timeout=timeout)
    if url.startswith(("postgresql://", "postgres://")):
        from hil.reservation.postgres import PostgresStore

        return PostgresStore(url, timeout=timeout)
    if re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://", url):
        raise StoreError(
            f"unsupported reservation store {redact(url)!r}: give a SQLite file path "
            "or a postgresql:// URL (--store or HIL_STORE)"
        )
    from hil.reservation.sqlite import SqliteStore

    return SqliteStore(Path(url).expanduser(), timeout=timeout)
