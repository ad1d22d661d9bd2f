"""PairRun records its hosts' infrastructure failures in the store's host health:
an unreachable host, a journal replay that fails, a restore that fails.  Real sshd
and agents (the netns lab); the failures are real ones (a closed port, an undo
command that exits 1)."""

from __future__ import annotations

import os
import signal

import pytest
from netnslab import NetnsLab

from hil.errors import AgentError, NotReady, RemoteError, SSHError
from hil.host.hosts import Hosts
from hil.host.journal import restore_host, ssh_undo
from hil.reservation import Store
from hil.run import PairRequest, PairRun
from tests.host.test_healthcheck import altered

PAIR = "ns0-ns1"
REQUEST = PairRequest(pair=PAIR, holder="health test", rdma=False)
FAILING_UNDO = ssh_undo("ns0", ["false"], "an undo that fails")


def test_an_unreachable_host_is_recorded(netns_lab: NetnsLab, store: Store) -> None:
    inv = altered(netns_lab.inventory(), "ns1", ssh_port=1)
    run = PairRun(inv, store, REQUEST)
    try:
        with pytest.raises(SSHError):
            run.open_hosts()
    finally:
        run.close()
    [ns0, ns1] = store.host_health(["ns0", "ns1"])
    assert ns0.state == "healthy"
    assert (ns1.state, ns1.failures) == ("suspect", 1)
    assert ns1.reason.startswith("unreachable: ns1: ")


def test_a_failing_journal_replay_is_recorded(netns_lab: NetnsLab, store: Store) -> None:
    entry = store.journal_add("ns0", "a-dead-run", FAILING_UNDO)
    run = PairRun(netns_lab.inventory(), store, REQUEST)
    try:
        with pytest.raises(RemoteError, match="an undo that fails"):
            run.open_hosts()
    finally:
        run.close()
        store.journal_remove(entry)
    [ns0] = store.host_health(["ns0"])
    assert ns0.state == "suspect"
    assert ns0.reason.startswith("restore_failed: ns0: an undo that fails")


def test_a_failing_restore_is_recorded(netns_lab: NetnsLab, store: Store) -> None:
    run = PairRun(netns_lab.inventory(), store, REQUEST)
    try:
        run.open_hosts()
        run.journal.change("ns0", FAILING_UNDO)
        report = run.restore()
    finally:
        run.close()
        for e in store.journal_entries("ns0"):
            store.journal_remove(e.id)
    assert report is not None and len(report.failed) == 1
    assert store.host_health(["ns0"])[0].reason.startswith("restore_failed: ")


def test_an_agent_killed_before_setup_is_recorded(netns_lab: NetnsLab, store: Store) -> None:
    inv = netns_lab.inventory()
    run = PairRun(inv, store, REQUEST)
    try:
        hosts = run.open_hosts()
        os.kill(hosts.agent("ns1").ping(), signal.SIGKILL)  # one pid namespace with the lab
        with pytest.raises(AgentError) as e:
            run.set_up()
        assert e.value.host == "ns1"
    finally:
        run.close()
        with Hosts(inv, store) as fresh:  # what the dead agent could not undo
            restore_host(fresh, "ns1").check("cleaning up ns1")
    events = [r.event for r in store.host_history("ns1")]
    assert events[0] == "agent_handshake", events
    assert store.host_health(["ns0"])[0].state == "healthy"


def test_a_pair_with_a_quarantined_host_is_not_run(netns_lab: NetnsLab, store: Store) -> None:
    store.quarantine_host("ns1", "PSU replaced, burn-in pending")
    with pytest.raises(NotReady, match="host ns1: quarantined since .*: PSU replaced"):
        PairRun(netns_lab.inventory(), store, REQUEST).reserve()
    assert store.leases() == []
