"""Expire a lease or a wait ticket by setting its expiry a minute back in the store itself.

A short TTL run out by sleeping can run out before the checks meant to see it still
held, on a loaded machine (the contract test's 0.2 s lease did in a fresh-clone
ci/tests, 2026-12-06); and a renewed one is renewed by as little, so it could run out
again before the checks after the renewal."""

from __future__ import annotations

import sqlite3
from typing import Literal

import psycopg


def backdate(store_url: str, row_id: str, table: Literal["leases", "tickets"] = "leases") -> None:
    """Set the expiry of lease (or ticket) ``row_id`` in the store at ``store_url`` 60 s back."""
    sql = f"UPDATE hil_{table} SET expires = expires - 60 WHERE id = %s"
    if store_url.startswith("postgresql"):
        with psycopg.connect(store_url, autocommit=True) as pg:
            pg.execute(sql, (row_id,))
    else:
        with sqlite3.connect(store_url, isolation_level=None) as db:
            db.execute(sql.replace("%s", "?"), (row_id,))
