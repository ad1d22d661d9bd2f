"""Expired leases are taken over; their holders learn it at the next heartbeat."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from hil.errors import BusyError, LeaseLost
from hil.reservation import Claim, Heartbeat, Holder, Store, open_store, reserve

AB = Claim("ab", ("a", "b"))
BC = Claim("bc", ("b", "c"))


def test_killed_holder_loses_its_pair_within_its_ttl(store_url: str, spawn: Any) -> None:
    ttl = 2.0
    holder = spawn(
        "hold", "--store", store_url, "--claims", json.dumps([["ab", "a", "b"]]), "--ttl", str(ttl)
    )
    assert holder.stdout is not None
    first = json.loads(holder.stdout.readline())
    with open_store(store_url) as store:
        # Well past one TTL, the holder's heartbeat still keeps the pair.
        time.sleep(1.5 * ttl)
        with pytest.raises(BusyError, match=r"held by .*\(holder\)"):
            reserve(store, [AB], Holder.current("next"))
        holder.kill()
        holder.wait(timeout=10)
        lease = reserve(store, [AB], Holder.current("next"), wait=ttl + 1.5, poll=0.1)
        assert lease.pair == "ab"
        with pytest.raises(LeaseLost, match=f"taken over .* by .*next.*lease {lease.id}"):
            store.renew(first["lease"])


def test_workers_killed_at_random_points_leave_a_working_store(
    store_url: str, spawn: Any, tmp_path: Path
) -> None:
    ttl = 1.5
    pairs = [["ab", "a", "b"], ["bc", "b", "c"]]
    workers = [
        spawn(
            "cycle",
            "--store",
            store_url,
            "--claims",
            json.dumps(pairs),
            "--cycles",
            "100000",
            "--seed",
            str(n),
            "--poll",
            "0.01",
            "--ttl",
            str(ttl),
            "--ticket-ttl",
            str(ttl),
            "--out",
            str(tmp_path / f"w{n}"),
        )
        for n in range(4)
    ]
    with open_store(store_url) as store:
        _until(lambda: len(store.leases()) > 0)
        for n, w in enumerate(workers):
            # Kill mid-cycle: inside a transaction, holding, or queueing.
            time.sleep(0.05 * (n + 1))
            w.kill()
            w.wait(timeout=10)
        # Their leases and wait tickets lapse within a TTL.
        lease = reserve(store, [AB, BC], Holder.current("after"), wait=ttl + 2, poll=0.1)
        second = reserve(
            store,
            [Claim("cd", ("c", "d")), Claim("ad", ("a", "d"))],
            Holder.current("after"),
            wait=ttl + 2,
            poll=0.1,
        )
        assert {lease.pair, second.pair} in ({"ab", "cd"}, {"bc", "ad"})


def test_a_killed_waiter_stops_blocking_the_queue(
    store_url: str, spawn: Any, tmp_path: Path
) -> None:
    with open_store(store_url) as store:
        first = reserve(store, [AB], Holder.current("first"))
        waiter = spawn(
            "cycle",
            "--store",
            store_url,
            "--claims",
            json.dumps([["ab", "a", "b"]]),
            "--cycles",
            "1",
            "--seed",
            "1",
            "--ticket-ttl",
            "1.5",
            "--out",
            str(tmp_path / "w"),
        )
        _until(lambda: len(store.tickets()) == 1)
        waiter.kill()
        waiter.wait(timeout=10)
        store.release(first.id)
        with pytest.raises(BusyError, match=r"queued for by .*contender 1"):
            reserve(store, [AB], Holder.current("next"))
        # Its ticket lapses within its ticket TTL.
        lease = reserve(store, [AB], Holder.current("next"), wait=4.5, poll=0.1)
        assert lease.pair == "ab"


def test_heartbeat_keeps_the_lease_alive(store: Store) -> None:
    # Renewed every third of its TTL: a TTL of 2 s leaves a renewal that a loaded machine
    # slows (its thread, the store's commit) 1.3 s of slack, one of 1 s only 0.67 s.
    lease = reserve(store, [AB], Holder.current(), ttl=2.0)
    with Heartbeat(store, lease) as beat:
        time.sleep(3.0)  # well past one TTL
        with pytest.raises(BusyError):
            reserve(store, [BC], Holder.current("other"))
        beat.check()
    assert beat.lost is None
    assert beat.lease.expires > lease.expires


def test_taken_over_holder_learns_it_at_the_next_heartbeat(store_url: str, store: Store) -> None:
    lease = reserve(store, [AB], Holder.current("first"), ttl=0.5)
    time.sleep(0.7)
    thief = reserve(store, [BC], Holder.current("thief"))
    lost = threading.Event()
    seen: list[LeaseLost] = []

    def on_lost(e: LeaseLost) -> None:
        seen.append(e)
        lost.set()

    # The heartbeat opens its own connection from the URL.
    with Heartbeat(store_url, lease, on_lost=on_lost) as beat:
        assert lost.wait(10)
    assert seen == [beat.lost]
    with pytest.raises(
        LeaseLost,
        match=rf"lease {lease.id} on pair ab expired .* taken over "
        rf".* by .*\(thief\) \(lease {thief.id}\)",
    ):
        beat.check()


def test_renewing_an_expired_lease_nobody_took_succeeds(store: Store) -> None:
    lease = reserve(store, [AB], Holder.current(), ttl=0.2)
    time.sleep(0.3)
    assert store.leases() == []
    renewed = store.renew(lease.id, ttl=30)
    assert renewed.expires > lease.expires
    assert [le.id for le in store.leases()] == [lease.id]


def test_heartbeat_that_cannot_reach_the_store_gives_up_at_expiry(tmp_path: Path) -> None:
    with open_store(str(tmp_path / "r.db")) as store:
        lease = reserve(store, [AB], Holder.current(), ttl=0.6)
    lost = threading.Event()
    # Nothing listens on port 1: every renewal fails until the lease expires.
    with Heartbeat("postgresql://hil@127.0.0.1:1/x", lease, on_lost=lambda _: lost.set()) as b:
        assert lost.wait(10)
    with pytest.raises(LeaseLost, match=f"could not renew lease {lease.id} .* before it expired"):
        b.check()


def _until(condition: Callable[[], bool], timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.02)
