"""Readiness on the recorded T6 pair (tests/data/t6): a clean pair passes, each
planted fault is reported with its fix, and pair setup refuses a failing pair."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path

import pytest
from fake_hosts import T6_NETDEV, FakeHosts, RecordedAgent, t6_hosts, t6_inventory

from hil.errors import NotReady, RemoteError
from hil.host.findings import Finding
from hil.host.journal import Journal
from hil.host.pairsetup import setup_pair
from hil.host.readiness import Readiness, host_readiness, pair_readiness
from hil.inventory.model import FirmwarePolicy, PinnedParam
from hil.reservation import Store

PARAMS = "/sys/module/iw_cxgb4/parameters"
DRVINFO = f"ethtool -i {T6_NETDEV}"

Plant = Callable[[RecordedAgent], None]


def _doctor(tmp_path: Path, plant: Plant | None = None, **inventory: object) -> Readiness:
    """Doctor the T6 pair, with ``plant`` done to t6b first."""
    hosts = t6_hosts(tmp_path, t6_inventory(**inventory))  # type: ignore[arg-type]
    if plant:
        plant(hosts.recorded("t6b"))
    return pair_readiness(hosts, hosts.inventory.pair("t6"))  # type: ignore[arg-type]


def _failing(r: Readiness) -> list[Finding]:
    assert not r.ok
    return list(r.failures)


def _one(r: Readiness, check: str, host: str = "t6b") -> Finding:
    found = [f for f in r.findings if f.check == check and f.host == host]
    assert len(found) == 1, r.findings
    return found[0]


def _firmware(version: str) -> Plant:
    """The card of t6b runs ``version``, as cxgb4's get_drvinfo formats it."""

    def plant(agent: RecordedAgent) -> None:
        text = agent.run(DRVINFO.split()).stdout
        agent.record(DRVINFO, text.replace("1.27.4.0, TP", f"{version}, TP"))

    return plant


def test_a_clean_pair_passes(tmp_path: Path) -> None:
    r = _doctor(tmp_path)
    assert r.ok, r.refusal()
    statuses = {(f.host, f.check): f.status for f in r.findings}
    for host in ("t6a", "t6b"):
        for check in ("rdma-device", "device-driver", "device-port", "firmware", "iwpmd"):
            assert statuses[host, check] == "ok"
        assert statuses[host, "link-speed"] == statuses[host, "mtu"] == "ok"
    assert statuses["t6", "mtu-ends"] == statuses["t6", "module-params"] == "ok"
    assert "rdma-core 44.0-2" in _one(r, "iwpmd").seen


def test_wrong_firmware_fails_under_exact(tmp_path: Path) -> None:
    (f,) = _failing(_doctor(tmp_path, _firmware("1.26.6.0")))
    assert (f.host, f.check, f.expected) == ("t6b", "firmware", "1.27.4.0")
    assert "firmware 1.26.6.0, TP 0.1.23.2" in f.seen
    assert f.fix.startswith("flash firmware 1.27.4.0")


@pytest.mark.parametrize(
    ("running", "ok"), [("1.26.6.0", False), ("1.27.4.0", True), ("1.28.0.0", True)]
)
def test_min_policy_wants_at_least_the_inventorys(tmp_path: Path, running: str, ok: bool) -> None:
    r = _doctor(tmp_path, _firmware(running), policy="min")
    f = _one(r, "firmware")
    assert (r.ok, f.status, f.expected) == (ok, "ok" if ok else "fail", "at least 1.27.4.0")


@pytest.mark.parametrize("policy", ["record", "exact"])
def test_record_policy_never_fails(tmp_path: Path, policy: FirmwarePolicy) -> None:
    r = _doctor(tmp_path, _firmware("0.0.1.0"), policy=policy)
    assert r.ok == (policy == "record")
    if policy == "record":
        assert _one(r, "firmware").status == "info"


def test_no_firmware_in_the_inventory_is_recorded(tmp_path: Path) -> None:
    f = _one(_doctor(tmp_path, firmware=None), "firmware")
    assert f.status == "info" and "1.27.4.0" in f.seen


def test_iwpmd_not_running_fails_with_how_to_start_it(tmp_path: Path) -> None:
    (f,) = _failing(_doctor(tmp_path, lambda a: a.record("pgrep -x iwpmd", status=1)))
    assert (f.host, f.check, f.seen) == ("t6b", "iwpmd", "not running")
    assert "systemctl enable --now iwpmd" in f.fix


def test_mtu_mismatch_between_the_ends_fails(tmp_path: Path) -> None:
    r = _doctor(tmp_path, lambda a: a.write(f"/sys/class/net/{T6_NETDEV}/mtu", "1500\n"), mtu=None)
    (f,) = _failing(r)
    assert (f.host, f.check, f.seen) == ("t6", "mtu-ends", "the ends differ: t6a 9000, t6b 1500")
    assert "same mtu" in f.fix


def test_an_mtu_setup_will_set_is_only_info(tmp_path: Path) -> None:
    r = _doctor(tmp_path, lambda a: a.write(f"/sys/class/net/{T6_NETDEV}/mtu", "1500\n"))
    assert r.ok
    assert _one(r, "mtu").status == "info" and _one(r, "mtu").fix == "pair setup sets it"


def test_speed_below_the_inventorys_fails(tmp_path: Path) -> None:
    r = _doctor(tmp_path, lambda a: a.write(f"/sys/class/net/{T6_NETDEV}/speed", "25000\n"))
    (f,) = _failing(r)
    assert (f.check, f.seen, f.expected) == (
        "link-speed",
        f"25000 Mb/s on {T6_NETDEV}",
        "100000 Mb/s",
    )
    assert "cable" in f.fix


def test_a_parameter_differing_between_the_hosts_fails(tmp_path: Path) -> None:
    r = _doctor(tmp_path, lambda a: a.write(f"{PARAMS}/ep_timeout_secs", "10\n"))
    (f,) = _failing(r)
    assert (f.host, f.check) == ("t6", "module-param")
    assert f.seen == "iw_cxgb4.ep_timeout_secs differs: t6a 60, t6b 10"
    assert "module_params: {iw_cxgb4: {ep_timeout_secs: V}}" in f.fix
    assert "ep_timeout_secs=10" in _one(r, "module-params").seen


def test_a_pinned_parameter_is_set_at_setup_so_doctor_only_notes_it(tmp_path: Path) -> None:
    pinned = (PinnedParam("iw_cxgb4", "ep_timeout_secs", "20"),)
    r = _doctor(
        tmp_path, lambda a: a.write(f"{PARAMS}/ep_timeout_secs", "10\n"), module_params=pinned
    )
    assert r.ok, r.refusal()
    f = _one(r, "module-param", "t6")
    assert (f.status, f.expected) == ("info", "20 (pinned)")


def test_a_device_not_run_by_iw_cxgb4_fails(tmp_path: Path) -> None:
    def plant(agent: RecordedAgent) -> None:
        agent.write("/sys/class/infiniband/cxgb4_0/node_desc", "Software iWARP stack\n")

    (f,) = _failing(_doctor(tmp_path, plant))
    assert (f.check, f.seen, f.expected) == ("device-driver", "cxgb4_0 runs siw", "iw_cxgb4")


def _port_moved(agent: RecordedAgent) -> None:
    """cxgb4_0's ports sit on the card's other netdev only."""
    links = json.loads(agent.run(["rdma", "-j", "link", "show"]).stdout)
    for link in links:
        link["netdev"] = f"{T6_NETDEV}d1"
    agent.record("rdma -j link show", json.dumps(links))


def test_a_device_port_not_on_the_netdev_fails(tmp_path: Path) -> None:
    (f,) = _failing(_doctor(tmp_path, _port_moved))
    assert f.check == "device-port"
    assert f.seen == (
        f"cxgb4_0 has no port on {T6_NETDEV} (port 1 on {T6_NETDEV}d1, port 2 on {T6_NETDEV}d1)"
    )
    assert "rdma link show" in f.fix


def test_a_siw_fallback_to_be_created_is_info_and_needs_no_iwpmd(tmp_path: Path) -> None:
    hosts = t6_hosts(tmp_path)
    inv = t6_inventory()
    port = inv.hosts["t6b"].rnics[0]
    host = dataclasses.replace(
        inv.hosts["t6b"],
        rnics=(dataclasses.replace(port, rdma_device="cxgb4_9", fallback="siw"),),
    )
    hosts.inventory = dataclasses.replace(inv, hosts={**inv.hosts, "t6b": host})
    r = host_readiness(hosts, "t6b")  # type: ignore[arg-type]
    assert r.ok, r.refusal()
    device = _one(r, "rdma-device")
    assert device.status == "info" and device.seen.endswith("created at setup (siw fallback)")
    assert _one(r, "iwpmd").status == "info" and "IW_F_NO_PORT_MAP" in _one(r, "iwpmd").seen


# -- pair setup ----------------------------------------------------------------


def _setup(hosts: FakeHosts, store: Store) -> None:
    journal = Journal(hosts, store, "lease-1")  # type: ignore[arg-type]
    try:
        setup_pair(hosts, hosts.inventory.pair("t6"), journal)  # type: ignore[arg-type]
    finally:
        journal.close().check("teardown")


def test_setup_of_the_clean_pair_passes(tmp_path: Path, store: Store) -> None:
    _setup(t6_hosts(tmp_path), store)


def test_setup_refuses_a_failing_pair_with_each_finding_and_fix(
    tmp_path: Path, store: Store
) -> None:
    hosts = t6_hosts(tmp_path)
    hosts.recorded("t6b").record("pgrep -x iwpmd", status=1)
    hosts.recorded("t6a").write(f"{PARAMS}/mpa_rev", "1\n")
    with pytest.raises(NotReady) as e:
        _setup(hosts, store)
    assert e.value.exit_code == 5
    lines = str(e.value).splitlines()
    assert lines[0] == "t6 is not ready (2 failing checks):"
    assert lines[1].startswith("  t6b iwpmd: not running (expected running (iw_cxgb4 maps")
    assert lines[2].startswith("  t6 module-param: iw_cxgb4.mpa_rev differs: t6a 1, t6b 2")


def test_setup_refuses_a_device_on_another_netdev(tmp_path: Path, store: Store) -> None:
    hosts = t6_hosts(tmp_path)
    _port_moved(hosts.recorded("t6b"))
    with pytest.raises(RemoteError, match=r"^t6b: enp129s0f4 \(port p0\): cxgb4_0 has no port on"):
        _setup(hosts, store)


def test_setup_refuses_a_device_of_another_driver(tmp_path: Path, store: Store) -> None:
    hosts = t6_hosts(tmp_path)
    hosts.recorded("t6a").write("/sys/class/infiniband/cxgb4_0/node_desc", "Software iWARP stack\n")
    with pytest.raises(
        RemoteError,
        match=r"^t6a: enp129s0f4 \(port p0\): RDMA device cxgb4_0 runs siw, "
        r"the inventory says iw_cxgb4",
    ):
        _setup(hosts, store)


def test_a_host_with_two_ports_names_the_port(tmp_path: Path) -> None:
    hosts = t6_hosts(tmp_path)
    host = hosts.inventory.hosts["t6a"]
    second = dataclasses.replace(
        host.rnics[0], name="p1", netdev=f"{T6_NETDEV}d1", mtu=None, speed=None, firmware=None
    )
    t6a = dataclasses.replace(host, rnics=(host.rnics[0], second))
    hosts.inventory = dataclasses.replace(
        hosts.inventory, hosts={**hosts.inventory.hosts, "t6a": t6a}
    )
    r = host_readiness(hosts, "t6a")  # type: ignore[arg-type]
    assert r.ok, r.refusal()
    ports = {(f.where, f.check): f for f in r.findings}
    assert ports["t6a:p0", "device-port"].status == "ok"
    down = ports["t6a:p1", "device-port"]  # cxgb4_0's port 2 has no carrier: setup brings it up
    assert (down.status, down.seen) == ("warn", f"cxgb4_0/2 on {T6_NETDEV}d1: DOWN (DISABLED)")
