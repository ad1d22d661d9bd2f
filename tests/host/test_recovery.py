"""Recovery against the netns lab's real sshd and agents: cycle (command power on the
controller), SSH, the journal of a dead run replayed, the health check recorded.

The netns hosts have no RDMA, so these recover with ``rdma=False``; the
virtual lab's tests (tests/plugin/test_crash_lab.py, tests/test_crash_nightly.py,
tests/run/test_peercase_lab.py) recover real crashed guests with every check.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import pytest
from netnslab import NetnsLab
from test_power import CYCLE, pdu_log, powered_inventory, stale_fence

from hil.errors import LeaseLost
from hil.host.hosts import Hosts
from hil.host.journal import ssh_undo
from hil.host.recovery import RecoveryFailed, recover
from hil.inventory.model import Inventory
from hil.reservation import Store

pytestmark = pytest.mark.netns


def quarantine_by_failures(store: Store, host: str) -> None:
    for _ in range(store.quarantine_after()):
        store.record_host_failure(host, "kernel_crash", "Kernel panic - not syncing")
    assert store.host_health([host])[0].state == "quarantined"


def test_a_crashed_host_is_cycled_its_journal_replayed_and_healthy_again(
    netns_lab: NetnsLab, tmp_path: Path, store: Store
) -> None:
    marker = tmp_path / "undone"
    store.journal_add("ns1", "dead-lease", ssh_undo("ns1", ["touch", str(marker)], "restore X"))
    quarantine_by_failures(store, "ns1")
    said: list[str] = []
    inv = powered_inventory(netns_lab, tmp_path, CYCLE)
    with Hosts(inv, store) as hosts:
        result = recover(hosts, store, "ns1", fence=None, say=said.append, timeout=60, rdma=False)
    assert pdu_log(tmp_path) == [f"{netns_lab.hosts[0].netns} cycle 3 ns1"]
    assert marker.exists() and store.journal_entries("ns1") == []
    assert result.ok and [c.status for c in result.checks] == ["ok", "ok", "n/a", "ok"]
    assert store.host_health(["ns1"])[0].state == "healthy"
    assert said[0] == "ns1: power cycle"
    assert "ns1: journal: undone ns1: restore X" in said
    assert said[-1].startswith("ns1: recovered in ")


def test_a_host_without_power_is_not_cycled_but_still_restored_and_checked(
    netns_lab: NetnsLab, store: Store
) -> None:
    said: list[str] = []
    with Hosts(netns_lab.inventory(), store) as hosts:
        result = recover(hosts, store, "ns0", fence=None, say=said.append, timeout=60, rdma=False)
    assert result.ok
    assert said[0] == "ns0: no power entry that recovery may use: not cycled; waiting for SSH"


def test_a_lost_lease_stops_the_recovery_before_the_cycle(
    netns_lab: NetnsLab, tmp_path: Path, store: Store
) -> None:
    fence = stale_fence(store)
    with Hosts(powered_inventory(netns_lab, tmp_path, CYCLE), store) as hosts:
        with pytest.raises(LeaseLost):
            recover(hosts, store, "ns1", fence=fence, say=print, timeout=30, rdma=False)
    assert pdu_log(tmp_path) == []
    assert store.host_health(["ns1"])[0].state == "healthy"  # not the host's failure


def unreachable(inv: Inventory, name: str) -> Inventory:
    host = inv.hosts[name]
    host = dataclasses.replace(host, ssh=dataclasses.replace(host.ssh, port=1, connect_timeout=1))
    return dataclasses.replace(inv, hosts={**inv.hosts, name: host})


def test_a_host_that_does_not_come_back_fails_at_ssh_within_the_bound(
    netns_lab: NetnsLab, tmp_path: Path, store: Store
) -> None:
    inv = unreachable(powered_inventory(netns_lab, tmp_path, CYCLE), "ns1")
    started = time.monotonic()
    with Hosts(inv, store) as hosts, pytest.raises(RecoveryFailed) as e:
        recover(hosts, store, "ns1", fence=None, say=print, timeout=4, rdma=False)
    assert time.monotonic() - started < 10
    assert e.value.step == "ssh" and e.value.host == "ns1"
    assert str(e.value).startswith("ns1: recovery failed at step ssh: no SSH within the bound")
    assert "`hil host power ns1 cycle`" in str(e.value)
    health = store.host_health(["ns1"])[0]
    assert (health.state, health.reason[:30]) == ("suspect", "unreachable: recovery, ssh: no")


def test_a_failing_undo_fails_the_journal_step_and_keeps_the_entry(
    netns_lab: NetnsLab, store: Store
) -> None:
    store.journal_add("ns0", "dead-lease", ssh_undo("ns0", ["false"], "restore Y"))
    with Hosts(netns_lab.inventory(), store) as hosts, pytest.raises(RecoveryFailed) as e:
        recover(hosts, store, "ns0", fence=None, say=print, timeout=30, rdma=False)
    assert e.value.step == "journal"
    assert "restore Y (journal entry" in str(e.value)
    assert [x.entry["what"] for x in store.journal_entries("ns0")] == ["restore Y"]
    assert store.host_health(["ns0"])[0].reason.startswith("restore_failed: recovery, journal")
    for entry in store.journal_entries("ns0"):
        store.journal_remove(entry.id)
