"""The contract every store keeps, run against SQLite and a real PostgreSQL."""

from __future__ import annotations

import pytest
from backdate import backdate

from hil.errors import InputError, LeaseLost
from hil.reservation import Claim, Holder, Store, open_store

AB = Claim("ab", ("a", "b"))
BC = Claim("bc", ("b", "c"))
CD = Claim("cd", ("c", "d"))
ME = Holder("alice", "ci-1", 42, "https://ci.example/job/7", "nightly")


def test_acquire_takes_the_first_free_claim(store: Store) -> None:
    lease = store.try_acquire([AB, CD], ME, 30)
    assert lease is not None
    assert (lease.pair, lease.hosts, lease.holder, lease.ttl) == ("ab", ("a", "b"), ME, 30)
    assert (lease.expires - lease.acquired).total_seconds() == pytest.approx(30)
    second = store.try_acquire([AB, CD], ME, 30)
    assert second is not None and second.pair == "cd"
    assert store.try_acquire([AB, CD], ME, 30) is None


def test_pairs_sharing_a_host_are_never_held_together(store: Store) -> None:
    assert store.try_acquire([AB], ME, 30) is not None
    assert store.try_acquire([BC], ME, 30) is None
    lease = store.try_acquire([BC, CD], ME, 30)
    assert lease is not None and lease.pair == "cd"


def test_release_frees_both_hosts_and_is_idempotent(store: Store) -> None:
    lease = store.try_acquire([AB], ME, 30)
    assert lease is not None
    store.release(lease.id)
    store.release(lease.id)
    assert store.try_acquire([BC], ME, 30) is not None


def test_get_and_leases_show_holder_and_times(store: Store) -> None:
    lease = store.try_acquire([AB], ME, 30)
    assert lease is not None
    assert store.get(lease.id) == lease
    assert store.leases() == [lease]
    with pytest.raises(InputError, match="lease nope is unknown"):
        store.get("nope")


def test_renew_extends_and_may_change_the_ttl(store: Store) -> None:
    lease = store.try_acquire([AB], ME, 30)
    assert lease is not None
    renewed = store.renew(lease.id, ttl=100)
    assert renewed.ttl == 100 and renewed.expires > lease.expires
    assert renewed.acquired == lease.acquired
    again = store.renew(lease.id)
    assert again.ttl == 100


def test_renew_of_a_released_lease_is_lost(store: Store) -> None:
    lease = store.try_acquire([AB], ME, 30)
    assert lease is not None
    store.release(lease.id)
    with pytest.raises(LeaseLost, match=f"lease {lease.id} is unknown .* released"):
        store.renew(lease.id)


def test_expired_lease_is_taken_over_and_its_holder_told_by_whom(
    store_url: str, store: Store
) -> None:
    old = store.try_acquire([AB], ME, 30)
    assert old is not None
    assert store.try_acquire([BC], ME, 30) is None
    backdate(store_url, old.id)
    assert store.leases() == []
    thief = Holder("bob", "ci-2", 7)
    new = store.try_acquire([BC], thief, 30)
    assert new is not None
    with pytest.raises(LeaseLost, match=f"on pair ab expired .* by bob@ci-2 pid 7 .*{new.id}"):
        store.renew(old.id)
    with pytest.raises(InputError, match="taken over"):
        store.get(old.id)
    # The whole old lease is gone: its other host is free too.
    assert store.try_acquire([Claim("a-only", ("a", "x"))], ME, 30) is not None


def test_ttl_must_be_positive(store: Store) -> None:
    with pytest.raises(InputError, match="TTL"):
        store.try_acquire([AB], ME, 0)


def test_a_waiter_ahead_blocks_newcomers(store: Store) -> None:
    held = store.try_acquire([AB], ME, 30)
    assert held is not None
    first = store.enqueue([AB], Holder("w1", "h", 1), 10)
    second = store.enqueue([BC], Holder("w2", "h", 2), 10)
    assert [t.id for t in store.tickets()] == [first, second]
    store.release(held.id)
    # bc is free, but the older ticket waits for its host b.
    assert store.try_acquire([BC], ME, 30) is None
    assert store.try_acquire([BC], ME, 30, ticket=second) is None
    got = store.try_acquire([AB], Holder("w1", "h", 1), 30, ticket=first)
    assert got is not None
    assert [t.id for t in store.tickets()] == [second]


def test_a_dead_waiter_stops_blocking_when_its_ticket_expires(store_url: str, store: Store) -> None:
    ticket = store.enqueue([AB], Holder("gone", "h", 1), 30)
    assert store.try_acquire([AB], ME, 30) is None
    backdate(store_url, ticket, "tickets")
    assert store.tickets() == []
    assert store.try_acquire([AB], ME, 30) is not None


def test_dequeue_is_idempotent(store: Store) -> None:
    ticket = store.enqueue([AB], ME, 10)
    store.dequeue(ticket)
    store.dequeue(ticket)
    assert store.try_acquire([AB], ME, 30) is not None


def test_journal_keeps_entries_per_host_across_connections(store_url: str) -> None:
    with open_store(store_url) as store:
        first = store.journal_add("a", "L1", {"op": "mtu", "old": 1500})
        second = store.journal_add("a", "L1", {"op": "addr", "old": ["198.18.0.1/24"]})
        store.journal_add("b", "L1", {"op": "mtu", "old": 9000})
    with open_store(store_url) as store:
        entries = store.journal_entries("a")
        assert [(e.id, e.lease_id, e.entry) for e in entries] == [
            (first, "L1", {"op": "mtu", "old": 1500}),
            (second, "L1", {"op": "addr", "old": ["198.18.0.1/24"]}),
        ]
        store.journal_remove(first)
        store.journal_remove(first)
        assert [e.id for e in store.journal_entries("a")] == [second]
        assert store.journal_entries("nobody") == []


def test_leases_survive_reopening_the_store(store_url: str) -> None:
    with open_store(store_url) as store:
        lease = store.try_acquire([AB], ME, 30)
    with open_store(store_url) as store:
        assert store.leases() == [lease]
