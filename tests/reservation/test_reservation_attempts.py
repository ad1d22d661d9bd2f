"""Attempt markers in the store, on SQLite and a real PostgreSQL: begun before a
test, ended after it, and found open after the run that began one was killed."""

from __future__ import annotations

import json
import signal
import sqlite3
import time
from typing import Any

import psycopg
import pytest

from hil.errors import InputError
from hil.reservation import Attempt, Claim, Holder, Store, open_store

AB = Claim("ab", ("a", "b"))
CD = Claim("cd", ("c", "d"))
ME = Holder("alice", "ci-1", 42, None, "nightly")


def _begin(store: Store, test: str, claim: Claim = AB, lease_id: str = "L1") -> int:
    return store.begin_attempt(test, claim.pair, claim.hosts, lease_id)


def test_a_marker_records_the_test_pair_lease_and_the_lease_holder(store: Store) -> None:
    lease = store.try_acquire([AB], ME, 30)
    assert lease is not None
    before = time.time()
    attempt_id = _begin(store, "suites/test_cm.py::test_connect", lease_id=lease.id)
    [a] = store.attempts()
    assert (a.id, a.test, a.pair, a.hosts, a.lease_id, a.holder) == (
        attempt_id,
        "suites/test_cm.py::test_connect",
        "ab",
        ("a", "b"),
        lease.id,
        "alice@ci-1 pid 42 (nightly)",
    )
    assert a.started.timestamp() == pytest.approx(before, abs=5)
    assert (a.ended, a.outcome) == (None, None)
    assert "never ended" in str(a)
    store.end_attempt(attempt_id, "passed")
    [done] = store.attempts()
    assert done.outcome == "passed" and done.ended is not None
    assert done.ended >= done.started
    assert done.to_json()["outcome"] == "passed"


def test_without_a_known_lease_the_holder_is_this_process(store: Store) -> None:
    _begin(store, "t", lease_id="not-in-the-store")
    [a] = store.attempts()
    assert a.holder == str(Holder.current())


def test_filters_combine_and_the_newest_comes_first(store: Store) -> None:
    first = _begin(store, "t1")
    second = _begin(store, "t2", CD)
    third = _begin(store, "t3")
    store.end_attempt(first, "passed")
    store.end_attempt(third, "host crashed")
    assert [a.id for a in store.attempts()] == [third, second, first]
    assert [a.id for a in store.attempts(hosts=["b"])] == [third, first]
    assert [a.id for a in store.attempts(hosts=["d", "a"])] == [third, second, first]
    assert store.attempts(hosts=[]) == []
    assert [a.id for a in store.attempts(unfinished=True)] == [second]
    assert [a.id for a in store.attempts(unfinished=False)] == [third, first]
    assert [a.id for a in store.attempts(outcome="host crashed")] == [third]
    assert store.attempts(hosts=["c"], outcome="passed") == []
    assert [a.id for a in store.attempts(limit=2)] == [third, second]


def test_ending_twice_keeps_the_first_outcome(store: Store) -> None:
    attempt_id = _begin(store, "t")
    store.end_attempt(attempt_id, "host crashed")
    store.end_attempt(attempt_id, "failed")
    assert store.attempts()[0].outcome == "host crashed"


def test_bad_input_is_refused_with_a_message(store: Store) -> None:
    with pytest.raises(InputError, match="attempt 999 is unknown"):
        store.end_attempt(999, "passed")
    attempt_id = _begin(store, "t")
    with pytest.raises(InputError, match="needs an outcome"):
        store.end_attempt(attempt_id, " ")
    with pytest.raises(InputError, match="needs a test"):
        _begin(store, "")
    with pytest.raises(InputError, match="two host names"):
        store.begin_attempt("t", "ab", ("a", ""), "L1")
    with pytest.raises(InputError, match="limit"):
        store.attempts(limit=0)
    assert [a.id for a in store.attempts()] == [attempt_id]


def test_a_marker_of_a_killed_run_is_found_open_by_the_next(store_url: str, spawn: Any) -> None:
    holder = spawn(
        "hold",
        "--store",
        store_url,
        "--claims",
        json.dumps([["ab", "a", "b"]]),
        "--ttl",
        "30",
        "--attempt",
        "suites/test_storm.py::test_storm",
    )
    assert holder.stdout is not None
    shown = json.loads(holder.stdout.readline())
    holder.send_signal(signal.SIGKILL)
    holder.wait(timeout=10)
    with open_store(store_url) as store:
        [left] = store.attempts(hosts=["a"], unfinished=True)
    assert isinstance(left, Attempt)
    assert (left.id, left.test, left.lease_id) == (
        shown["attempt"],
        "suites/test_storm.py::test_storm",
        shown["lease"],
    )
    assert left.holder.endswith(f"pid {holder.pid} (holder)")


_V2_LEASES = (
    "CREATE TABLE hil_leases (id TEXT PRIMARY KEY, pair TEXT NOT NULL,"
    " host_a TEXT NOT NULL, host_b TEXT NOT NULL, holder TEXT NOT NULL,"
    " acquired DOUBLE PRECISION NOT NULL, expires DOUBLE PRECISION NOT NULL,"
    " ttl DOUBLE PRECISION NOT NULL)"
)


def test_a_store_made_before_attempt_markers_gains_them(store_url: str) -> None:
    if store_url.startswith("postgresql"):
        with psycopg.connect(store_url, autocommit=True) as pg:
            pg.execute(_V2_LEASES)
    else:
        db = sqlite3.connect(store_url, isolation_level=None)
        db.execute(_V2_LEASES)
        db.close()
    with open_store(store_url) as store:
        attempt_id = _begin(store, "t")
    with open_store(store_url) as again:
        assert [a.id for a in again.attempts(unfinished=True)] == [attempt_id]


def test_a_crasher_is_skipped_only_until_a_later_run_of_it_passes(store: Store) -> None:
    from hil.reservation.attempt import crashers

    def tried(test: str, outcome: str) -> None:
        store.end_attempt(_begin(store, test), outcome)

    tried("t::cleared", "host crashed")
    tried("t::cleared", "passed")  # a later pass: run it again
    tried("t::crasher", "passed")
    tried("t::crasher", "host crashed")
    tried("t::crasher", "skipped")  # skipped as a crasher: says nothing either way
    tried("t::crasher", "run died")
    found = crashers(store.attempts(hosts=AB.hosts, limit=1000))
    assert sorted(found) == ["t::crasher"]
    assert found["t::crasher"].outcome == "host crashed"
