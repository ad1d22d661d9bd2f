"""reserve(): fail at once naming the holders, or queue first come first served."""

from __future__ import annotations

import threading
import time

import pytest

from hil.errors import BusyError, InputError, WaitTimeout
from hil.reservation import Claim, Holder, Lease, Store, open_store, reserve
from hil.reservation.reserve import TICKET_TTL

AB = Claim("ab", ("a", "b"))
BC = Claim("bc", ("b", "c"))
OWNER = Holder("alice", "ci-1", 42, None, "nightly")


def test_busy_names_who_holds_each_pair_and_until_when(store: Store) -> None:
    lease = reserve(store, [AB], OWNER)
    with pytest.raises(BusyError) as e:
        reserve(store, [AB, BC], Holder.current())
    text = str(e.value)
    assert (
        f"pair ab (a, b) is held by alice@ci-1 pid 42 (nightly) until "
        f"{lease.expires:%H:%M:%S} UTC (lease {lease.id} on ab)" in text
    )
    assert "pair bc (b, c) is held by alice@ci-1" in text


def test_no_claims_is_bad_input(store: Store) -> None:
    with pytest.raises(InputError, match="no pair"):
        reserve(store, [], OWNER)


def test_wait_times_out_naming_the_holder_and_leaves_the_queue(store: Store) -> None:
    reserve(store, [AB], OWNER)
    said: list[str] = []
    started = time.monotonic()
    with pytest.raises(WaitTimeout, match=r"within 0.5 s: pair ab .* held by alice@ci-1"):
        reserve(store, [AB], Holder.current(), wait=0.5, poll=0.1, progress=said.append)
    assert time.monotonic() - started < 5
    assert said and said[0].startswith("waiting for a pair")
    assert "held by alice@ci-1" in said[0]
    assert store.tickets() == []


def test_waiters_get_the_pair_in_arrival_order(store_url: str, store: Store) -> None:
    first = reserve(store, [Claim("xa", ("x", "a"))], OWNER)
    order: list[str] = []
    errors: list[BaseException] = []

    def wait_for_pair(name: str) -> None:
        try:
            with open_store(store_url) as mine:
                lease = reserve(mine, [AB], Holder.current(name), wait=30, poll=0.05)
                order.append(name)
                time.sleep(0.1)
                mine.release(lease.id)
        except BaseException as e:  # noqa: BLE001 -- reported by the test thread below
            errors.append(e)

    threads = []
    for n, name in enumerate(["w1", "w2", "w3", "w4"], start=1):
        t = threading.Thread(target=wait_for_pair, args=(name,), daemon=True)
        t.start()
        threads.append(t)
        _until(lambda n=n: len(store.tickets()) == n)
    # A newcomer may not take a free pair that shares a host with the queue's.
    with pytest.raises(BusyError, match=r"pair bd \(b, d\) is free but queued for by .*\(w1\)"):
        reserve(store, [Claim("bd", ("b", "d"))], Holder.current("jumper"))
    store.release(first.id)
    for t in threads:
        t.join(30)
    assert errors == []
    assert order == ["w1", "w2", "w3", "w4"]


def test_waiting_for_any_of_several_pairs_takes_the_first_freed(store: Store) -> None:
    cd = Claim("cd", ("c", "d"))
    ab_lease = reserve(store, [AB], OWNER)
    cd_lease = reserve(store, [cd], OWNER)
    got: list[Lease] = []
    t = threading.Thread(
        daemon=True,
        target=lambda: got.append(reserve(store, [AB, cd], Holder.current(), wait=30, poll=0.05)),
    )
    t.start()
    _until(lambda: len(store.tickets()) == 1)
    store.release(cd_lease.id)
    t.join(30)
    assert [le.pair for le in got] == ["cd"]
    assert store.get(ab_lease.id) == ab_lease


def _until(condition: object, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.02)


def test_default_ticket_ttl_outlives_several_polls(store: Store) -> None:
    reserve(store, [AB], OWNER)
    seen: list[float] = []

    def look(_: str) -> None:
        seen.extend((t.expires - t.created).total_seconds() for t in store.tickets())

    with pytest.raises(WaitTimeout):
        reserve(store, [AB], Holder.current(), wait=0.2, poll=0.1, progress=look)
    assert seen and seen[0] == pytest.approx(TICKET_TTL, abs=0.01)
