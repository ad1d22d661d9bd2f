"""Pair setup: RDMA device picking with the agent faked (the host kernel has no
RDMA), and the network part plus the no-RDMA error path on the real netns lab."""

from __future__ import annotations

import dataclasses
import ipaddress
import uuid
from typing import Any

import pytest
from fake_hosts import FakeHosts, two_host_inventory
from netnslab.lab import NetnsLab

from hil.errors import RemoteError
from hil.host.hosts import Hosts
from hil.host.journal import Journal, replay
from hil.host.pairsetup import setup_pair
from hil.inventory.model import Host, Inventory
from hil.reservation import Store


def _fake(store: Store, **inventory: object) -> tuple[FakeHosts, Journal]:
    hosts = FakeHosts(two_host_inventory(**inventory), store)  # type: ignore[arg-type]
    return hosts, Journal(hosts, store, "lease-1")  # type: ignore[arg-type]


# -- RDMA device picking, agent faked ------------------------------------------


def test_the_inventorys_device_is_used_when_present(store: Store) -> None:
    hosts, journal = _fake(store)
    for agent in hosts.agents.values():
        agent.rdma_devices["cxgb4_0"] = "eth1"
    state = setup_pair(hosts, hosts.inventory.pair("ab"), journal)  # type: ignore[arg-type]
    assert (state.a.rdma_device, state.a.created) == ("cxgb4_0", False)
    assert state.reached


def test_siw_fallback_creates_a_device_and_teardown_deletes_it(store: Store) -> None:
    hosts, journal = _fake(store, fallback="siw")
    state = setup_pair(hosts, hosts.inventory.pair("ab"), journal)  # type: ignore[arg-type]
    assert (state.b.rdma_device, state.b.created) == ("siw_eth1", True)
    assert hosts.agents["b"].rdma_devices == {"siw_eth1": "eth1"}
    journal.close().check("teardown")
    assert hosts.agents["b"].rdma_devices == {}


def test_an_existing_siw_device_is_reused_not_created(store: Store) -> None:
    hosts, journal = _fake(store, fallback="siw")
    hosts.agents["a"].rdma_devices["siw_eth1"] = "eth1"
    state = setup_pair(hosts, hosts.inventory.pair("ab"), journal)  # type: ignore[arg-type]
    assert (state.a.rdma_device, state.a.created) == ("siw_eth1", False)
    journal.close()
    assert hosts.agents["a"].rdma_devices == {"siw_eth1": "eth1"}


def test_an_absent_device_without_fallback_names_host_netdev_and_driver(store: Store) -> None:
    hosts, journal = _fake(store)
    hosts.agents["a"].rdma_devices["cxgb4_0"] = "eth1"
    with pytest.raises(RemoteError) as e:
        setup_pair(hosts, hosts.inventory.pair("ab"), journal)  # type: ignore[arg-type]
    assert e.value.exit_code == 3
    assert str(e.value) == (
        "b: eth1 (port p0): RDMA device cxgb4_0 is absent (the host has no RDMA device); "
        "is the iw_cxgb4 driver loaded (modprobe iw_cxgb4)? or set fallback: siw"
    )


def test_the_network_changes_are_journaled_and_undone(store: Store) -> None:
    hosts, journal = _fake(store, sysctls=(("net.ipv4.tcp_retries2", "5"),))
    hosts.agents["a"].rdma_devices["cxgb4_0"] = "eth1"
    hosts.agents["b"].rdma_devices["cxgb4_0"] = "eth1"
    setup_pair(hosts, hosts.inventory.pair("ab"), journal)  # type: ignore[arg-type]
    a = hosts.agents["a"]
    assert (a.links["eth1"].mtu, a.links["eth1"].up) == (9000, True)
    assert a.links["eth1"].addresses == {"198.18.0.1/24"}
    assert a.sysctls["net.ipv4.tcp_retries2"] == "5"
    journal.close().check("teardown")
    eth1 = a.links["eth1"]
    assert (eth1.mtu, eth1.up, eth1.addresses) == (1500, False, set())
    assert a.sysctls["net.ipv4.tcp_retries2"] == "0"
    assert store.journal_entries("a") == []


# -- the real netns lab ------------------------------------------------------------


@pytest.fixture
def lab(netns_lab: NetnsLab) -> NetnsLab:
    """The session's netns lab (tests/conftest.py); each test leaves it as it found it."""
    return netns_lab


def _configured(inv: Inventory, n: int, **rnic: Any) -> Host:
    """Host ns<n> with its port p0 changed; a second address, mtu 9000, a sysctl."""
    host = inv.hosts[f"ns{n}"]
    port = dataclasses.replace(
        host.rnics[0], address=ipaddress.ip_interface(f"198.18.0.{11 + n}/24"), mtu=9000, **rnic
    )
    return dataclasses.replace(host, rnics=(port,), sysctls=(("net.ipv4.tcp_retries2", "5"),))


def _inventory(lab: NetnsLab, **rnic: Any) -> Inventory:
    inv = lab.inventory()
    return dataclasses.replace(
        inv, hosts={h: _configured(inv, i, **rnic) for i, h in enumerate(sorted(inv.hosts))}
    )


def _netdev(lab: NetnsLab, n: int) -> tuple[int, set[str], str]:
    import json

    link = json.loads(lab.exec(n, ["ip", "-j", "addr", "show", "dev", "data0"]).stdout)[0]
    addresses = {
        f"{a['local']}/{a['prefixlen']}" for a in link["addr_info"] if a["family"] == "inet"
    }
    sysctl = lab.exec(n, ["sysctl", "-n", "net.ipv4.tcp_retries2"]).stdout.strip()
    return link["mtu"], addresses, sysctl


@pytest.mark.netns
def test_setup_configures_real_hosts_reaches_b_and_teardown_restores(
    lab: NetnsLab, store: Store
) -> None:
    before = [_netdev(lab, n) for n in (0, 1)]
    with Hosts(_inventory(lab), store) as hosts:
        journal = Journal(hosts, store, f"setup-{uuid.uuid4().hex[:8]}")
        try:
            state = setup_pair(hosts, hosts.inventory.pair("ns0-ns1"), journal, rdma=False)
            assert state.reached and state.a.mtu == 9000 and state.b.address == "198.18.0.12/24"
            mtu, addresses, sysctl = _netdev(lab, 1)
            assert (mtu, sysctl) == (9000, "5")
            assert addresses == {"198.18.0.2/24", "198.18.0.12/24"}  # added, not flushed
        finally:
            journal.close().check("teardown")
    assert [_netdev(lab, n) for n in (0, 1)] == before


@pytest.mark.netns
def test_a_port_without_rdma_device_or_fallback_fails_naming_host_and_netdev(
    lab: NetnsLab, store: Store
) -> None:
    before = _netdev(lab, 0)
    with Hosts(_inventory(lab, fallback=None, rdma_device=None), store) as hosts:
        journal = Journal(hosts, store, f"setup-{uuid.uuid4().hex[:8]}")
        try:
            with pytest.raises(
                RemoteError,
                match=r"^ns0: data0 \(port p0\): the inventory names "
                r"no rdma_device and no fallback \(RDMA is unavailable: ",
            ) as e:
                setup_pair(hosts, hosts.inventory.pair("ns0-ns1"), journal)
            assert e.value.exit_code == 3
        finally:
            journal.close().check("teardown")
    assert _netdev(lab, 0) == before


@pytest.mark.netns
def test_siw_fallback_on_a_kernel_without_rdma_fails_clearly_and_journals_nothing(
    lab: NetnsLab, store: Store
) -> None:
    with Hosts(_inventory(lab), store) as hosts:
        journal = Journal(hosts, store, f"setup-{uuid.uuid4().hex[:8]}")
        try:
            with pytest.raises(
                RemoteError,
                match=r"^ns0: data0 \(port p0\): cannot create siw "
                r"device siw_data0 .*modprobe siw",
            ):
                setup_pair(hosts, hosts.inventory.pair("ns0-ns1"), journal)
            entries = store.journal_entries("ns0")
            assert entries and not any("siw" in e.entry["what"] for e in entries)
        finally:
            journal.close().check("teardown")


def _addresses6(lab: NetnsLab, n: int) -> dict[str, bool]:
    """The global IPv6 addresses of host ns<n>'s data0, each with whether it is tentative."""
    import json

    link = json.loads(lab.exec(n, ["ip", "-j", "addr", "show", "dev", "data0"]).stdout)[0]
    return {
        f"{a['local']}/{a['prefixlen']}": bool(a.get("tentative"))
        for a in link["addr_info"]
        if a["family"] == "inet6" and a["scope"] == "global"
    }


@pytest.mark.netns
def test_address6_is_added_usable_reached_and_undone_also_after_a_killed_run(
    lab: NetnsLab, store: Store
) -> None:
    before = [_addresses6(lab, n) for n in (0, 1)]
    inv = lab.inventory()
    six = {
        h: dataclasses.replace(
            inv.hosts[h],
            rnics=(
                dataclasses.replace(
                    inv.hosts[h].rnics[0],
                    address6=ipaddress.IPv6Interface(f"2001:db8:7::{i + 1}/64"),
                ),
            ),
        )
        for i, h in enumerate(sorted(inv.hosts))
    }
    inv = dataclasses.replace(inv, hosts=six)
    pair = inv.pair("ns0-ns1")
    assert pair.families == ("ipv4", "ipv6")
    with Hosts(inv, store) as hosts:
        journal = Journal(hosts, store, f"setup-{uuid.uuid4().hex[:8]}")
        # _check_reach pinged 2001:db8:7::2 from ns0: a tentative address would not answer.
        assert setup_pair(hosts, pair, journal, rdma=False).reached
        # Added without DAD: usable at once (hil/agent/remote/netlink.py).
        assert _addresses6(lab, 1) == {**before[1], "2001:db8:7::2/64": False}
        # An admin link pull keeps it (keep_addr_on_down; by default Linux flushes it).
        lab.exec(1, ["ip", "link", "set", "data0", "down"])
        lab.exec(1, ["ip", "link", "set", "data0", "up"])
        assert "2001:db8:7::2/64" in _addresses6(lab, 1)
        # The run dies here: its journal stays in the store, never closed.
    with Hosts(inv, store) as hosts:
        report = replay(hosts, pair)
    keep = "net/ipv6/conf/data0/keep_addr_on_down"
    assert report.undone == (  # newest first
        "ns1: remove 2001:db8:7::2/64 from data0",
        f"ns1: restore sysctl {keep}=0",
        "ns0: remove 2001:db8:7::1/64 from data0",
        f"ns0: restore sysctl {keep}=0",
    )
    assert [_addresses6(lab, n) for n in (0, 1)] == before
    assert [lab.exec(n, ["cat", f"/proc/sys/{keep}"]).stdout.strip() for n in (0, 1)] == ["0"] * 2
