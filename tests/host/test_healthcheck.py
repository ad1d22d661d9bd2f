"""The host health check against the netns lab's real sshd and agents, and what it
records in the store.

The netns hosts have no RDMA (no RDMA netlink in a network namespace of this
kernel), so "RDMA device present" fails there for real, as ``hil host doctor``
does; ``rdma=False`` (``--no-rdma``) is what a lab without RDMA passes with.
"""

from __future__ import annotations

import dataclasses

import pytest
from netnslab import NetnsLab

from hil.agent.client import AgentCallError
from hil.errors import (
    AgentError,
    CommandFailed,
    CommandTimeout,
    HilError,
    NotReady,
    RemoteError,
    Unreachable,
)
from hil.host.healthcheck import (
    HealthCheck,
    check_host,
    failure_kind,
    health_round,
    record_check,
)
from hil.host.hosts import Hosts
from hil.host.journal import ssh_undo
from hil.inventory.model import Inventory
from hil.reservation import Claim, Holder, Store


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        (Unreachable("h", "connect timed out"), "unreachable"),
        (CommandTimeout("h", "sleep did not finish"), "unreachable"),
        (AgentError("h", "handshake: hash differs"), "agent_handshake"),
        (AgentCallError("h", "set_link", "netlink", "EINVAL", {}), None),
        (CommandFailed("h", ["false"], 1, "", ""), None),
        (RemoteError("h", "something else"), None),
        (NotReady("not ready"), None),
    ],
)
def test_which_errors_are_infrastructure_failures_of_a_host(
    error: HilError, kind: str | None
) -> None:
    """A run records only what says the host is not usable, not a call's own failure."""
    assert failure_kind(error) == kind


def altered(
    inv: Inventory, name: str, ssh_port: int | None = None, python: str | None = None
) -> Inventory:
    """``inv`` with host ``name``'s SSH port or python changed."""
    host = inv.hosts[name]
    if ssh_port is not None:
        host = dataclasses.replace(host, ssh=dataclasses.replace(host.ssh, port=ssh_port))
    if python is not None:
        host = dataclasses.replace(host, python=python)
    return dataclasses.replace(inv, hosts={**inv.hosts, name: host})


def run_check(inv: Inventory, store: Store, name: str, rdma: bool = True) -> HealthCheck:
    with Hosts(inv, store) as hosts:
        return check_host(hosts, store, name, rdma)


def statuses(result: HealthCheck) -> list[tuple[str, str]]:
    return [(c.name, c.status) for c in result.checks]


def test_a_reachable_host_without_rdma_passes_with_rdma_off(
    netns_lab: NetnsLab, store: Store
) -> None:
    result = run_check(netns_lab.inventory(), store, "ns0", rdma=False)
    assert statuses(result) == [("ssh", "ok"), ("agent", "ok"), ("rdma", "n/a"), ("journal", "ok")]
    assert result.ok
    assert "agent pid" in result.checks[1].seen
    assert "RDMA off" in result.checks[2].seen


def test_with_rdma_on_the_missing_rdma_fails_for_real(netns_lab: NetnsLab, store: Store) -> None:
    result = run_check(netns_lab.inventory(), store, "ns0")
    assert result.failure is not None and result.failure.name == "rdma"
    assert "no siw_data0 (fallback: siw)" in result.failure.seen
    assert "no RDMA netlink" in result.failure.seen
    health = record_check(store, result)
    assert (health.state, health.failures) == ("suspect", 1)
    assert health.reason.startswith("rdma_device: ")


def test_an_unreachable_host_fails_ssh_and_skips_the_rest(
    netns_lab: NetnsLab, store: Store
) -> None:
    inv = altered(netns_lab.inventory(), "ns1", ssh_port=1)  # nothing listens there
    result = run_check(inv, store, "ns1")
    assert statuses(result) == [
        ("ssh", "fail"),
        ("agent", "n/a"),
        ("rdma", "n/a"),
        ("journal", "ok"),
    ]
    assert "ns1" in result.checks[0].seen
    assert record_check(store, result).reason.startswith("unreachable: ")


def test_an_agent_that_cannot_start_fails_the_handshake(netns_lab: NetnsLab, store: Store) -> None:
    inv = altered(netns_lab.inventory(), "ns0", python="/bin/false")
    result = run_check(inv, store, "ns0")
    assert statuses(result)[:3] == [("ssh", "ok"), ("agent", "fail"), ("rdma", "n/a")]
    assert record_check(store, result).reason.startswith("agent_handshake: ")


def test_a_journal_left_by_a_dead_run_fails_one_of_a_live_lease_does_not(
    netns_lab: NetnsLab, store: Store
) -> None:
    store.journal_add("ns0", "dead-lease", ssh_undo("ns0", ["true"], "restore mtu"))
    result = run_check(netns_lab.inventory(), store, "ns0", rdma=False)
    assert result.failure is not None and result.failure.name == "journal"
    assert "1 entries left by a dead run (newest: restore mtu)" in result.failure.seen
    assert "hil host restore ns0" in result.failure.seen
    lease = store.try_acquire([Claim("p", ("ns0", "ns1"))], Holder.current(), 30)
    assert lease is not None
    held = run_check(netns_lab.inventory(), store, "ns0", rdma=False)
    assert held.ok and held.checks[-1].status == "n/a"
    assert lease.id in held.checks[-1].seen


def test_a_round_records_failures_until_quarantine_and_a_pass_heals(
    netns_lab: NetnsLab, store: Store
) -> None:
    broken = altered(netns_lab.inventory(), "ns1", ssh_port=1)
    for _ in range(3):
        good, bad = health_round(broken, store, ["ns0", "ns1"], rdma=False)
        assert good.ok and not bad.ok
    ns0, ns1 = store.host_health(["ns0", "ns1"])
    assert ns0.state == "healthy" and ns0.since is None  # a pass on a healthy host: nothing
    assert (ns1.state, ns1.failures) == ("quarantined", 3)
    assert [r.event for r in store.host_history("ns1")] == ["unreachable"] * 3
    [fixed] = health_round(netns_lab.inventory(), store, ["ns1"], rdma=False)
    assert fixed.ok
    assert store.host_health(["ns1"])[0].state == "healthy"
    assert store.host_history("ns1")[-1].detail == "ssh ok, agent ok, rdma n/a, journal ok"


def test_the_netns_inventory_ports_have_the_siw_fallback(netns_lab: NetnsLab) -> None:
    """The premise of the RDMA tests above: each port asks for an RDMA device."""
    for host in netns_lab.inventory().hosts.values():
        assert all(r.fallback == "siw" for r in host.rnics), host
