"""Readiness on the recorded E810 pair (tests/data/e810): a clean pair passes with every irdma
check, and each planted fault (RoCE mode, iwpmd, firmware, MTU, speed, a devlink parameter that
differs between the hosts, a pending NVM, the out-of-tree driver in RoCE) is named with its fix."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path

from fake_hosts import E810_NETDEV, RecordedAgent, e810_hosts, e810_inventory

from hil.cli.host_doctor import table
from hil.host.findings import Finding
from hil.host.readiness import Readiness, pair_readiness
from hil.inventory.model import Inventory, PinnedDevlink

PARAM_SHOW = "devlink -j dev param show"
DEV_INFO = "devlink -j dev info"
DRVINFO = f"ethtool -i {E810_NETDEV}"
PF = "pci/0000:17:00.0"

Plant = Callable[[RecordedAgent], None]


def _doctor(tmp_path: Path, plant: Plant | None = None, inv: Inventory | None = None) -> Readiness:
    """Doctor the E810 pair, with ``plant`` done to e810b first."""
    hosts = e810_hosts(tmp_path, inv)
    if plant:
        plant(hosts.recorded("e810b"))
    return pair_readiness(hosts, hosts.inventory.pair("e810"))  # type: ignore[arg-type]


def _one(r: Readiness, check: str, host: str = "e810b") -> Finding:
    found = [f for f in r.findings if f.check == check and f.host == host]
    assert len(found) == 1, r.findings
    return found[0]


def _only_failure(r: Readiness, check: str, host: str = "e810b") -> Finding:
    assert [(f.check, f.host) for f in r.failures] == [(check, host)], r.refusal()
    return r.failures[0]


def _params(**values: object) -> Plant:
    """e810b's ice devlink parameters, with ``values`` changed."""

    def plant(agent: RecordedAgent) -> None:
        doc = json.loads(agent.run(PARAM_SHOW.split()).stdout)
        for p in doc["param"][PF]:
            if p["name"] in values:
                p["values"][0]["value"] = values[p["name"]]
        agent.record(PARAM_SHOW, json.dumps(doc))

    return plant


def test_a_clean_pair_passes_with_the_irdma_checks(tmp_path: Path) -> None:
    r = _doctor(tmp_path)
    assert r.ok, r.refusal()
    statuses = {f.check: f.status for f in r.findings if f.host == "e810a"}
    ok = ("rdma-device", "device-driver", "device-port", "firmware", "link-speed", "mtu")
    assert statuses == {
        **dict.fromkeys((*ok, "iwpmd", "rdma-mode"), "ok"),
        "nvm": "info",
        "rdma-drivers": "info",
    }
    assert _one(r, "nvm").seen == (
        "NVM 4.40, EETRACK 0x8001c967, firmware 7.4.13, UNDI 1.3534.0, DDP 1.3.36.0"
    )
    assert _one(r, "rdma-drivers").seen == "ice 6.12.118+deb12-amd64, irdma in-tree"
    assert _one(r, "devlink-params", "e810").seen == "4 alike on both hosts"
    assert table(r).endswith("\ne810: ready")


def test_roce_mode_fails_with_the_devlink_commands(tmp_path: Path) -> None:
    def roce(agent: RecordedAgent) -> None:
        agent.write("/sys/class/infiniband/irdma0/node_type", "1: CA\n")
        _params(enable_roce=True, enable_iwarp=False)(agent)

    r = _doctor(tmp_path, roce)
    found = [(f.check, f.host) for f in r.failures]
    assert found == [("rdma-mode", "e810b"), ("devlink-param", "e810"), ("devlink-param", "e810")]
    mode = r.failures[0]
    assert mode.seen == (
        "not iWARP: irdma0: node_type 1: CA, enable_iwarp false (runtime), "
        "enable_roce true (runtime)"
    )
    assert mode.fix.startswith(
        f"on e810b: devlink dev param set {PF} name enable_roce value false cmode runtime; "
        f"devlink dev param set {PF} name enable_iwarp value true cmode runtime "
        "(hil switches it only when the link pins it"
    )


def test_iwpmd_not_running_fails(tmp_path: Path) -> None:
    r = _doctor(tmp_path, lambda a: a.record("pgrep -x iwpmd", status=1))
    f = _only_failure(r, "iwpmd")
    assert (f.seen, f.expected) == ("not running", "running (irdma maps its ports)")
    assert f.fix.startswith("start it (systemctl enable --now iwpmd")


def test_other_firmware_fails(tmp_path: Path) -> None:
    def older(agent: RecordedAgent) -> None:
        text = agent.run(DRVINFO.split()).stdout
        agent.record(DRVINFO, text.replace("4.40 0x8001c967", "4.30 0x8001a5b1"))

    f = _only_failure(_doctor(tmp_path, older), "firmware")
    assert f.seen == "ice 6.12.118+deb12-amd64, firmware 4.30 0x8001a5b1 1.3534.0"
    assert f.fix.startswith("flash firmware 4.40 on ens1f0's card")


def test_mtus_that_differ_between_the_ends_fail(tmp_path: Path) -> None:
    inv = e810_inventory()
    b = inv.hosts["e810b"]
    port = dataclasses.replace(b.rnics[0], mtu=1500)
    inv = dataclasses.replace(
        inv, hosts={**inv.hosts, "e810b": dataclasses.replace(b, rnics=(port,))}
    )
    f = _only_failure(_doctor(tmp_path, inv=inv), "mtu-ends", "e810")
    assert f.seen == "the ends differ: e810a 9000, e810b 1500"


def test_a_slower_link_fails(tmp_path: Path) -> None:
    r = _doctor(tmp_path, lambda a: a.write(f"/sys/class/net/{E810_NETDEV}/speed", "25000\n"))
    f = _only_failure(r, "link-speed")
    assert (f.seen, f.expected) == (f"25000 Mb/s on {E810_NETDEV}", "100000 Mb/s")


def test_a_devlink_parameter_that_differs_between_the_hosts_fails(tmp_path: Path) -> None:
    f = _only_failure(
        _doctor(tmp_path, _params(local_forwarding="prioritized")), "devlink-param", "e810"
    )
    assert f.seen == (
        "local_forwarding differs: e810a enabled (runtime), e810b prioritized (runtime)"
    )
    assert f.fix.startswith(f"set it alike: devlink dev param set {PF} name local_forwarding")


def test_a_flashed_nvm_not_yet_running_is_a_warning(tmp_path: Path) -> None:
    def flashed(agent: RecordedAgent) -> None:
        doc = json.loads(agent.run(DEV_INFO.split()).stdout)
        doc["info"][PF]["versions"]["stored"]["fw.psid.api"] = "4.50"
        agent.record(DEV_INFO, json.dumps(doc))

    r = _doctor(tmp_path, flashed)
    assert r.ok
    f = _one(r, "nvm")
    assert f.status == "warn" and f.seen.endswith("flashed, not running: fw.psid.api 4.50")
    assert f.fix.startswith("reboot the host (or devlink dev reload)")


def test_the_out_of_tree_driver_in_roce_mode_fails(tmp_path: Path) -> None:
    def out_of_tree(agent: RecordedAgent) -> None:
        agent.write("/sys/module/irdma/version", "1.15.11\n")
        agent.write("/sys/module/irdma/parameters/roce_ena", "1\n")

    f = _only_failure(_doctor(tmp_path, out_of_tree), "rdma-drivers")
    assert f.seen == (
        "ice 6.12.118+deb12-amd64, irdma 1.15.11, roce_ena 1: the out-of-tree irdma runs RoCEv2"
    )
    assert "options irdma roce_ena=0" in f.fix


def test_without_devlink_node_type_alone_tells_the_mode(tmp_path: Path) -> None:
    def no_devlink(agent: RecordedAgent) -> None:
        agent.forget(PARAM_SHOW)
        agent.forget(DEV_INFO)

    r = _doctor(tmp_path, no_devlink)
    assert r.ok, r.refusal()
    assert _one(r, "rdma-mode").seen == "iWARP (irdma0: node_type 4: RNIC)"
    assert _one(r, "devlink-param").status == "warn"
    assert "devlink-params" not in {f.check for f in r.findings}


def test_roce_mode_is_info_when_the_link_pins_iwarp(tmp_path: Path) -> None:
    def roce(agent: RecordedAgent) -> None:
        agent.write("/sys/class/infiniband/irdma0/node_type", "1: CA\n")
        _params(enable_roce=True, enable_iwarp=False)(agent)

    pins = (PinnedDevlink("enable_roce", "false"), PinnedDevlink("enable_iwarp", "true"))
    r = _doctor(tmp_path, roce, e810_inventory(devlink_params=pins))
    assert r.ok, r.refusal()
    mode = _one(r, "rdma-mode")
    assert (mode.status, mode.fix) == (
        "info",
        "pair setup sets it (devlink_params of the link pin enable_iwarp true)",
    )
    assert _one(r, "devlink-params", "e810").seen == "4 alike on both hosts (2 pinned)"


def test_a_pinned_devlink_parameter_may_differ_before_setup(tmp_path: Path) -> None:
    pins = (PinnedDevlink("local_forwarding", "enabled"),)
    r = _doctor(
        tmp_path, _params(local_forwarding="prioritized"), e810_inventory(devlink_params=pins)
    )
    assert r.ok, r.refusal()
