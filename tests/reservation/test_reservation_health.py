"""Host health in the store, on SQLite and a real PostgreSQL: states, history,
the quarantine threshold, reservations that skip quarantined hosts, and stores
made by versions that had no health tables."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Sequence
from typing import Any

import psycopg
import pytest

from hil.errors import BusyError, InputError, NotReady, WaitTimeout
from hil.reservation import Claim, Holder, Store, open_store, reserve
from hil.reservation.health import QUARANTINE_AFTER

AB = Claim("ab", ("a", "b"))
CD = Claim("cd", ("c", "d"))
ME = Holder("alice", "ci-1", 42, None, "nightly")


def fail(store: Store, host: str, times: int = 1, kind: str = "unreachable") -> None:
    for _ in range(times):
        n = store.host_health([host])[0].failures + 1
        store.record_host_failure(host, kind, f"ssh connect timed out ({n})")


def test_an_unknown_host_is_healthy(store: Store) -> None:
    [h] = store.host_health(["a"])
    assert (h.state, h.since, h.failures, h.manual) == ("healthy", None, 0, False)
    assert store.host_health() == []
    assert store.host_history("a") == []


def test_a_failure_makes_a_host_suspect_with_its_kind_and_detail(store: Store) -> None:
    h = store.record_host_failure("a", "agent_handshake", "agent did not answer")
    assert (h.state, h.failures, h.reason) == (
        "suspect",
        1,
        "agent_handshake: agent did not answer",
    )
    assert h.since is not None
    assert store.host_health(["a"]) == [h]
    [rec] = store.host_history("a")
    assert (rec.event, rec.previous, rec.state, rec.detail) == (
        "agent_handshake",
        "healthy",
        "suspect",
        "agent did not answer",
    )


def test_consecutive_failures_quarantine_at_the_default_threshold(store: Store) -> None:
    assert store.quarantine_after() == QUARANTINE_AFTER == 3
    fail(store, "a", 2)
    first = store.host_health(["a"])[0]
    assert first.state == "suspect"
    fail(store, "a")
    [h] = store.host_health(["a"])
    assert h.state == "quarantined" and not h.manual
    assert h.reason == (
        "3 consecutive infrastructure failures, the last unreachable: ssh connect timed out (3)"
    )
    fail(store, "a")  # stays quarantined, since unchanged, the count goes on
    [again] = store.host_health(["a"])
    assert (again.state, again.since, again.failures) == ("quarantined", h.since, 4)
    assert [r.state for r in store.host_history("a")] == ["suspect"] * 2 + ["quarantined"] * 2


def test_the_threshold_is_a_store_setting(store_url: str, store: Store) -> None:
    store.set_quarantine_after(1)
    with open_store(store_url) as other:  # every runner of the store sees it
        assert other.quarantine_after() == 1
        fail(other, "a")
    assert store.host_health(["a"])[0].state == "quarantined"
    with pytest.raises(InputError, match="at least 1"):
        store.set_quarantine_after(0)


def test_a_passing_check_makes_a_host_healthy_and_resets_the_streak(store: Store) -> None:
    fail(store, "a", 2)
    h = store.record_health_check_passed("a", "ssh, agent, journal ok")
    assert (h.state, h.failures, h.reason) == ("healthy", 0, "")
    fail(store, "a", 2)  # the streak starts again: suspect, not quarantined
    assert store.host_health(["a"])[0].state == "suspect"
    fail(store, "a")
    assert store.record_health_check_passed("a").state == "healthy"
    events = [(r.event, r.state) for r in store.host_history("a")]
    assert events[-1] == ("check_passed", "healthy")
    # A pass on a healthy host is not history.
    store.record_health_check_passed("a")
    assert len(store.host_history("a")) == len(events)


def test_a_manual_quarantine_stays_until_released(store: Store) -> None:
    h = store.quarantine_host("a", "  NIC  replaced,\n waiting for firmware ")
    assert (h.state, h.manual, h.reason) == (
        "quarantined",
        True,
        "NIC replaced, waiting for firmware",
    )
    assert store.record_health_check_passed("a").state == "quarantined"
    fail(store, "a", 5)
    [still] = store.host_health(["a"])
    assert (still.state, still.reason, still.since) == ("quarantined", h.reason, h.since)
    released = store.release_host("a")
    assert (released.state, released.failures, released.manual) == ("healthy", 0, False)
    assert [r.event for r in store.host_history("a")][0] == "quarantine"
    assert store.host_history("a")[-1].event == "release"


def test_bad_input_is_refused_with_the_reason(store: Store) -> None:
    with pytest.raises(InputError, match="needs a reason"):
        store.quarantine_host("a", "   ")
    with pytest.raises(InputError, match=r"host a is not quarantined \(a: healthy\)"):
        store.release_host("a")
    with pytest.raises(InputError, match="unknown failure kind 'tired'"):
        store.record_host_failure("a", "tired", "zzz")
    assert store.host_health() == []


def test_a_quarantined_host_is_never_handed_out(store: Store) -> None:
    store.quarantine_host("b", "flaky PCIe slot")
    assert store.try_acquire([AB], ME, 30) is None
    lease = store.try_acquire([AB, CD], ME, 30)
    assert lease is not None and lease.pair == "cd"


def test_reserve_says_which_host_is_out_and_why(store: Store) -> None:
    fail(store, "b", 3)
    with pytest.raises(NotReady, match="pair ab .* is out"):
        reserve(store, [AB], ME)
    with pytest.raises(NotReady) as e:
        reserve(store, [AB], ME, wait=30)  # fails at once: waiting would not help
    text = str(e.value)
    assert "no pair can be handed out: pair ab (a, b) is out: host b: quarantined since " in text
    assert "3 consecutive infrastructure failures, the last unreachable" in text
    assert "hil host release-quarantine" in text


def test_busy_and_out_pairs_are_told_apart(store: Store) -> None:
    store.quarantine_host("a", "disk dying")
    reserve(store, [CD], ME)
    with pytest.raises(BusyError) as e:
        reserve(store, [AB, CD], Holder.current())
    assert "pair ab (a, b) is out: host a: quarantined since" in str(e.value)
    assert "disk dying" in str(e.value)
    assert "pair cd (c, d) is held by alice@ci-1" in str(e.value)


def test_a_waiter_stops_when_its_last_pair_is_quarantined(store_url: str, store: Store) -> None:
    reserve(store, [CD], ME)
    store.quarantine_host("a", "gone")
    with pytest.raises(WaitTimeout, match="pair ab .* is out"):
        reserve(store, [AB, CD], Holder.current(), wait=0.3, poll=0.1)
    with open_store(store_url) as other:
        later = threading.Timer(0.5, other.quarantine_host, ("c", "also gone"))
        later.start()
        started = time.monotonic()
        with pytest.raises(NotReady, match="host c: quarantined since .*: also gone"):
            reserve(store, [AB, CD], Holder.current(), wait=30, poll=0.1)
        later.join()
    assert time.monotonic() - started < 10
    assert store.tickets() == []


def test_a_released_host_is_handed_out_again(store: Store) -> None:
    store.quarantine_host("a", "maintenance")
    store.release_host("a")
    assert reserve(store, [AB], ME).pair == "ab"


# The schema of the versions before host health, verbatim: a store they made
# must open, keep its leases and journal, and gain the health tables.
V1_SCHEMA = [
    "CREATE TABLE hil_leases (id TEXT PRIMARY KEY, pair TEXT NOT NULL,"
    " host_a TEXT NOT NULL, host_b TEXT NOT NULL, holder TEXT NOT NULL,"
    " acquired DOUBLE PRECISION NOT NULL, expires DOUBLE PRECISION NOT NULL,"
    " ttl DOUBLE PRECISION NOT NULL)",
    "CREATE TABLE hil_lost (lease_id TEXT PRIMARY KEY, pair TEXT NOT NULL,"
    " expired DOUBLE PRECISION NOT NULL, taken_by TEXT NOT NULL, taker TEXT NOT NULL,"
    " taken_at DOUBLE PRECISION NOT NULL)",
    "CREATE TABLE hil_tickets (id TEXT PRIMARY KEY, seq BIGINT NOT NULL,"
    " claims TEXT NOT NULL, holder TEXT NOT NULL, created DOUBLE PRECISION NOT NULL,"
    " expires DOUBLE PRECISION NOT NULL)",
    "CREATE TABLE hil_journal (id {id}, host TEXT NOT NULL,"
    " lease_id TEXT NOT NULL, created DOUBLE PRECISION NOT NULL, entry TEXT NOT NULL)",
    "CREATE INDEX hil_journal_host ON hil_journal (host, id)",
    "INSERT INTO hil_leases VALUES ('old1', 'ab', 'a', 'b',"
    ' \'{{"user": "bob", "hostname": "ci-0", "pid": 7}}\', {now}, {now} + 3600, 3600)',
    "INSERT INTO hil_journal (host, lease_id, created, entry)"
    " VALUES ('a', 'old1', {now}, '{{\"what\": \"mtu\"}}')",
]


def _v1(run: Any, id_column: str, now: float) -> None:
    for sql in V1_SCHEMA:
        run(sql.format(id=id_column, now=now))


def make_v1_store(store_url: str) -> None:
    """Make the store at ``store_url`` as the first version did, with lease old1 on ab."""
    if store_url.startswith("postgresql"):
        with psycopg.connect(store_url, autocommit=True) as pg:
            _v1(pg.execute, "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY", time.time())
    else:
        db = sqlite3.connect(store_url, isolation_level=None)
        _v1(db.execute, "INTEGER PRIMARY KEY AUTOINCREMENT", time.time())
        db.close()


def test_a_store_made_before_host_health_keeps_working(store_url: str) -> None:
    make_v1_store(store_url)
    with open_store(store_url) as s:
        [lease] = s.leases()
        assert (lease.id, lease.holder.user) == ("old1", "bob")
        assert [e.entry for e in s.journal_entries("a")] == [{"what": "mtu"}]
        s.quarantine_host("c", "old store, new feature")
        assert _names(s.host_health()) == ["c"]
        assert s.try_acquire([CD], ME, 30) is None
        s.release(lease.id)
        assert s.try_acquire([AB], ME, 30) is not None
    with open_store(store_url) as again:  # opening twice changes nothing
        assert again.host_health()[0].reason == "old store, new feature"


def _names(healths: Sequence[Any]) -> list[str]:
    return [h.host for h in healths]
