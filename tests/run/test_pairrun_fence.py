"""A pair run whose lease was taken over changes nothing on its hosts: its set-up
(ports, module parameters) goes through the fenced journal.  The recorded T6 pair
stands in for the hosts; the store is a real SQLite file, the takeover a real one."""

from __future__ import annotations

import sqlite3
import time

import pytest
from fake_hosts import FakeHosts, t6_inventory

from hil.errors import LeaseLost
from hil.inventory.model import PinnedParam
from hil.reservation import Claim, Holder, Store
from hil.run import PairRequest, PairRun

TIMEOUT = "/sys/module/iw_cxgb4/parameters/ep_timeout_secs"
PINNED = (PinnedParam("iw_cxgb4", "ep_timeout_secs", "10"),)


def _expire(store: Store, lease_id: str) -> None:
    """What the store sees of a holder paused past its TTL: its lease has expired.

    (The run's heartbeat renews every TTL/3, 100 s here: it cannot interfere.)
    """
    with sqlite3.connect(store.url, isolation_level=None) as db:
        db.execute("UPDATE hil_leases SET expires = ? WHERE id = ?", (time.time() - 1, lease_id))


def test_a_run_whose_pair_was_taken_over_sets_nothing_up(
    store: Store, fakes: dict[str, FakeHosts]
) -> None:
    run = PairRun(t6_inventory(module_params=PINNED), store, PairRequest(pair="t6"))
    try:
        run.open_hosts()
        _expire(store, run.lease.id)
        new = store.try_acquire([Claim("t6", ("t6a", "t6b"))], Holder("bob", "ci-2", 7), 30)
        assert new is not None and new.token > run.lease.token
        with pytest.raises(LeaseLost, match=f"taken over .* by bob@ci-2 pid 7 .*{new.id}"):
            run.set_up()
        with pytest.raises(LeaseLost):
            run.fence()
        hosts = fakes["hosts"]
        assert [hosts.recorded(h).file(TIMEOUT).read_text().strip() for h in ("t6a", "t6b")] == [
            "60",
            "60",
        ]
        assert store.journal_entries("t6a") == store.journal_entries("t6b") == []
    finally:
        run.close()
    assert store.get(new.id) == new  # closing the lost run left the new lease alone
