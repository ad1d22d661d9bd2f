"""Fencing tokens, on SQLite and a real PostgreSQL: every grant gets a larger
token, ``Store.fence`` and fenced journal records refuse a lease that was taken
over, and stores made before tokens gain them."""

from __future__ import annotations

import sqlite3
import time

import psycopg
import pytest
from backdate import backdate
from test_reservation_health import make_v1_store

from hil.errors import LeaseLost
from hil.reservation import Claim, Holder, Lease, Store, open_store

AB = Claim("ab", ("a", "b"))
BC = Claim("bc", ("b", "c"))
ME = Holder("alice", "ci-1", 42)
THIEF = Holder("bob", "ci-2", 7, None, "next run")


def _take(store: Store, claim: Claim = AB, holder: Holder = ME, ttl: float = 30) -> Lease:
    lease = store.try_acquire([claim], holder, ttl)
    assert lease is not None
    return lease


def _expired(store_url: str, store: Store) -> Lease:
    """A lease of ab whose TTL ran out with nobody taking it (backdated in the store)."""
    lease = _take(store)
    backdate(store_url, lease.id)
    return lease


def _taken_over(store: Store) -> tuple[Lease, Lease]:
    old = _take(store, ttl=0.2)
    time.sleep(0.3)
    return old, _take(store, BC, THIEF)


def test_every_grant_gets_a_larger_token_also_after_release(store: Store) -> None:
    first = _take(store)
    store.release(first.id)
    second = _take(store)
    other = _take(store, Claim("cd", ("c", "d")))
    assert 0 < first.token < second.token < other.token
    assert store.get(second.id).token == second.token
    assert store.renew(second.id).token == second.token
    assert second.to_json()["token"] == second.token


def test_tokens_stay_larger_than_any_held_when_the_counter_is_lost(
    store_url: str, store: Store
) -> None:
    held = _take(store)
    sql = "DELETE FROM hil_settings WHERE name = 'fence_token'"
    if store_url.startswith("postgresql"):
        with psycopg.connect(store_url, autocommit=True) as pg:
            pg.execute(sql)
    else:
        with sqlite3.connect(store_url, isolation_level=None) as db:
            db.execute(sql)
    assert _take(store, Claim("cd", ("c", "d"))).token == held.token + 1


def test_a_takeover_gets_a_larger_token_and_fences_the_old_holder_out(store: Store) -> None:
    old, new = _taken_over(store)
    assert new.token > old.token
    with pytest.raises(
        LeaseLost, match=f"taken over .* by bob@ci-2 pid 7 \\(next run\\).*{new.id}"
    ):
        store.fence(old.id, old.token)
    assert store.fence(new.id, new.token) == store.get(new.id)


def test_a_token_that_is_not_the_leases_is_refused(store: Store) -> None:
    lease = _take(store)
    with pytest.raises(
        LeaseLost,
        match=f"fencing token 0 is not lease {lease.id}'s \\(pair ab, token {lease.token}\\)",
    ):
        store.fence(lease.id, 0)
    with pytest.raises(LeaseLost, match="lease nope is unknown"):
        store.fence("nope", lease.token)


def test_an_expired_lease_nobody_took_is_renewed_by_the_fence(store_url: str, store: Store) -> None:
    lease = _expired(store_url, store)
    assert store.leases() == []
    fenced = store.fence(lease.id, lease.token)
    assert fenced.expires > lease.expires and fenced.token == lease.token
    assert store.leases() == [fenced]
    assert store.try_acquire([BC], THIEF, 30) is None  # held again


def test_a_fenced_journal_record_is_refused_and_not_written_after_a_takeover(
    store: Store,
) -> None:
    old, new = _taken_over(store)
    with pytest.raises(LeaseLost, match=f"lease {new.id}"):
        store.journal_add("b", old.id, {"what": "pull the link"}, token=old.token)
    assert store.journal_entries("b") == []
    entry = store.journal_add("b", new.id, {"what": "set mtu"}, token=new.token)
    assert [e.id for e in store.journal_entries("b")] == [entry]


def test_a_fenced_journal_record_renews_an_expired_lease_nobody_took(
    store_url: str, store: Store
) -> None:
    lease = _expired(store_url, store)
    assert store.leases() == []
    store.journal_add("a", lease.id, {"what": "set mtu"}, token=lease.token)
    assert [x.id for x in store.leases()] == [lease.id]


def test_a_store_made_before_tokens_gains_them(store_url: str) -> None:
    make_v1_store(store_url)
    with open_store(store_url) as store:
        [old] = store.leases()
        assert (old.id, old.token) == ("old1", 0)
        assert store.fence("old1", 0) == old
        new = _take(store, Claim("cd", ("c", "d")))
        assert new.token == 1
    with open_store(store_url) as again:  # opening twice migrates nothing more
        assert [x.token for x in again.leases()] == [0, 1]
