"""The restore journal against a real SQLite store, with the agent faked at its boundary.

The journal against real hosts is exercised by tests/test_linkctl.py and
tests/test_pairsetup.py on the netns lab.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from fake_hosts import FakeHosts, two_host_inventory

from hil.errors import LeaseLost, RemoteError
from hil.host.journal import Journal, agent_undo, replay, restore_host
from hil.reservation import Claim, Holder, Store


@pytest.fixture
def hosts(store: Store) -> FakeHosts:
    return FakeHosts(two_host_inventory(), store)


def _mtu(hosts: FakeHosts, host: str, journal: Journal, mtu: int) -> None:
    """A change as callers write it: journal the undo, then change."""
    link = hosts.agents[host].links["eth1"]
    journal.change(host, agent_undo("set_link", f"mtu {link.mtu}", netdev="eth1", mtu=link.mtu))
    link.mtu = mtu


def test_close_undoes_newest_first_and_empties_the_journal(hosts: FakeHosts, store: Store) -> None:
    journal = Journal(hosts, store, "lease-1")  # type: ignore[arg-type]
    _mtu(hosts, "a", journal, 2000)
    _mtu(hosts, "a", journal, 3000)
    _mtu(hosts, "b", journal, 4000)
    report = journal.close()
    assert report.failed == ()
    assert report.undone == ("b: mtu 1500", "a: mtu 2000", "a: mtu 1500")
    assert hosts.agents["a"].links["eth1"].mtu == 1500
    assert hosts.agents["b"].links["eth1"].mtu == 1500
    assert store.journal_entries("a") == [] and store.journal_entries("b") == []


def test_a_failing_undo_is_reported_kept_and_the_rest_still_run(
    hosts: FakeHosts, store: Store
) -> None:
    journal = Journal(hosts, store, "lease-1")  # type: ignore[arg-type]
    _mtu(hosts, "a", journal, 2000)
    journal.change("a", agent_undo("sysctl_set", "restore sysctl x", name="x", value="1"))
    _mtu(hosts, "b", journal, 4000)
    hosts.agents["a"].fail["sysctl_set"] = "os"
    report = journal.close()
    assert [f.what for f in report.failed] == ["restore sysctl x"]
    assert report.undone == ("b: mtu 1500", "a: mtu 1500")
    assert [e.entry["what"] for e in store.journal_entries("a")] == ["restore sysctl x"]
    with pytest.raises(RemoteError, match=r"a: teardown: 1 undo\(s\) failed.*restore sysctl x"):
        report.check("teardown")


def test_replay_undoes_what_a_dead_run_left_on_the_pair(hosts: FakeHosts, store: Store) -> None:
    dead = Journal(hosts, store, "dead-lease")  # type: ignore[arg-type]
    _mtu(hosts, "a", dead, 2000)
    _mtu(hosts, "b", dead, 3000)
    # The run dies here: no close().  The next reservation replays.
    report = replay(hosts, hosts.inventory.pair("ab"))  # type: ignore[arg-type]
    assert report.undone == ("b: mtu 1500", "a: mtu 1500")
    assert hosts.agents["a"].links["eth1"].mtu == 1500
    assert replay(hosts, hosts.inventory.pair("ab")).undone == ()  # type: ignore[arg-type]


def test_restore_host_touches_only_that_host(hosts: FakeHosts, store: Store) -> None:
    dead = Journal(hosts, store, "dead-lease")  # type: ignore[arg-type]
    _mtu(hosts, "a", dead, 2000)
    _mtu(hosts, "b", dead, 3000)
    assert restore_host(hosts, "b").undone == ("b: mtu 1500",)  # type: ignore[arg-type]
    assert hosts.agents["a"].links["eth1"].mtu == 2000
    assert len(store.journal_entries("a")) == 1


def test_missing_ok_counts_an_already_undone_change_as_undone(
    hosts: FakeHosts, store: Store
) -> None:
    journal = Journal(hosts, store, "lease-1")  # type: ignore[arg-type]
    address = "198.18.9.1/24"
    undo = agent_undo("delete_address", f"remove {address}", netdev="eth1", address=address)
    journal.change("a", undo)  # the run died before it added the address
    strict = agent_undo("delete_address", "strict remove", netdev="eth1", address="198.18.9.2/24")
    journal.change("b", strict)
    undo["missing_ok"] = True
    store.journal_remove(store.journal_entries("a")[0].id)
    journal.change("a", undo)
    report = journal.close()
    assert report.undone == ("a: remove 198.18.9.1/24",)
    assert [f.what for f in report.failed] == ["strict remove"]


def test_then_entries_run_after_their_entry(hosts: FakeHosts, store: Store) -> None:
    journal = Journal(hosts, store, "lease-1")  # type: ignore[arg-type]
    undo = agent_undo("set_link", "up", netdev="eth1", up=True)
    undo["then"] = [agent_undo("wait_link", "wait", netdev="eth1", carrier=True)]
    journal.change("a", undo)
    journal.close()
    assert [m for m, _ in hosts.agents["a"].calls] == ["set_link", "wait_link"]


@pytest.mark.parametrize(
    "entry",
    [
        {"kind": "agent", "method": "set_link", "params": {}},  # no what
        {"kind": "closure", "what": "x"},
        {"kind": "agent", "what": "x", "params": {"f": print}},  # not JSON-safe
        # agent entries name a method of the agent protocol, with the params it declares
        {"kind": "agent", "what": "x", "method": "set_lnk", "params": {"netdev": "eth1"}},
        {
            "kind": "agent",
            "what": "x",
            "method": "set_link",
            "params": {"netdev": "eth1", "mtuu": 1500},
        },
        {"kind": "agent", "what": "x", "method": "set_link", "params": {"mtu": 1500}},
        {"kind": "agent", "what": "x", "method": "set_link", "params": {"netdev": 1}},
        {
            "kind": "ssh",
            "on": "a",
            "argv": ["true"],
            "what": "x",
            "then": [{"kind": "agent", "what": "y", "method": "wait_link", "params": {}}],
        },
    ],
)
def test_change_refuses_entries_another_process_could_not_replay(
    hosts: FakeHosts, store: Store, entry: dict[str, Any]
) -> None:
    journal = Journal(hosts, store, "lease-1")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        journal.change("a", entry)
    assert store.journal_entries("a") == []


def test_entries_keep_their_json_and_old_ones_still_replay(hosts: FakeHosts, store: Store) -> None:
    undo = agent_undo("set_link", "mtu 1500", netdev="eth1", mtu=1500)
    assert undo == {
        "kind": "agent",
        "method": "set_link",
        "params": {"netdev": "eth1", "mtu": 1500},
        "what": "mtu 1500",
    }
    # What an older hil stored, straight into the store (no agent_undo, no checks).
    store.journal_add(
        "a",
        "dead-lease",
        {
            "kind": "agent",
            "method": "set_link",
            "params": {"netdev": "eth1", "mtu": 1500},
            "what": "old mtu 1500",
            "link": "ab",
        },
    )
    hosts.agents["a"].links["eth1"].mtu = 2000
    assert restore_host(hosts, "a").undone == ("a: old mtu 1500",)  # type: ignore[arg-type]
    assert hosts.agents["a"].links["eth1"].mtu == 1500


def test_a_fenced_journal_of_a_lost_lease_changes_and_undoes_nothing(
    hosts: FakeHosts, store: Store
) -> None:
    pair = Claim("ab", ("a", "b"))
    old = store.try_acquire([pair], Holder("old", "ci-1", 1), 0.2)
    assert old is not None
    journal = Journal(hosts, store, old.id, token=old.token)  # type: ignore[arg-type]
    _mtu(hosts, "a", journal, 2000)
    time.sleep(0.3)
    new = store.try_acquire([pair], Holder("new", "ci-2", 2), 30)
    assert new is not None
    with pytest.raises(LeaseLost, match=f"taken over .* by new@ci-2 pid 2 .*{new.id}"):
        _mtu(hosts, "b", journal, 4000)
    assert store.journal_entries("b") == [] and hosts.agents["b"].links["eth1"].mtu == 1500
    with pytest.raises(LeaseLost):
        journal.close()
    with pytest.raises(LeaseLost):
        journal.fence()
    # The old run's entry stays for the new holder's replay; its own is not touched.
    assert hosts.agents["a"].links["eth1"].mtu == 2000
    assert [e.lease_id for e in store.journal_entries("a")] == [old.id]
