"""Provider detection on the recorded Intel E810 pair (tests/data/e810, tests/fake_hosts.py).

irdma has no ``node_desc``: it is known by the driver of its PCI function
(``ice``, or ``i40e`` on an X722); a device in RoCEv2 mode is refused with the
devlink commands that switch it; a port that fell back to siw is labelled siw.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fake_hosts import E810_NETDEV, KALLSYMS_GREP, FakeHosts, e810_hosts, e810_inventory

from hil.errors import NotReady
from hil.host.pairsetup import PairState, PortState
from hil.judge.profiles import siw_profile
from hil.run.provider import Provider, detect

SIW_DEVICE = f"siw_{E810_NETDEV}"
PCI = "/sys/devices/pci0000:16/0000:16:02.0/0000:17:00.0"


@pytest.fixture
def hosts(tmp_path: Path) -> FakeHosts:
    return e810_hosts(tmp_path)


def _detect(hosts: FakeHosts, dev_a: str = "irdma0", dev_b: str = "irdma0") -> Provider:
    ports = [
        PortState(h, "p0", E810_NETDEV, None, 9000, dev, dev != "irdma0")
        for h, dev in (("e810a", dev_a), ("e810b", dev_b))
    ]
    state = PairState("e810", ports[0], ports[1], True)
    return detect(hosts, e810_inventory().pair("e810"), state)  # type: ignore[arg-type]


def _fall_back_to_siw(hosts: FakeHosts, host: str) -> None:
    agent = hosts.recorded(host)
    agent.write(f"/sys/class/infiniband/{SIW_DEVICE}/node_desc", "Software iWARP stack\n")
    agent.record(KALLSYMS_GREP, "siw_netdev_down\n")  # a 6.1 siw, no KASAN
    agent.sysctls |= {"net.ipv4.tcp_retries2": "5", "net.ipv4.tcp_syn_retries": "6"}


def test_the_recorded_pair_runs_irdma_known_by_its_pci_function_bound_by_ice(
    hosts: FakeHosts,
) -> None:
    provider = _detect(hosts)
    assert [h.driver for h in provider.hosts] == ["irdma", "irdma"]
    assert provider.describe("e810") == "pair e810 runs irdma on both hosts"


def test_an_x722_device_is_known_by_i40e(hosts: FakeHosts) -> None:
    agent = hosts.recorded("e810a")
    links = json.loads((agent.root / "symlinks.json").read_text())
    links[f"{PCI}/driver"] = "/sys/bus/pci/drivers/i40e"
    (agent.root / "symlinks.json").write_text(json.dumps(links))
    assert _detect(hosts).hosts[0].driver == "irdma"


def test_a_device_in_roce_mode_is_refused_with_the_devlink_commands(hosts: FakeHosts) -> None:
    hosts.recorded("e810b").write("/sys/class/infiniband/irdma0/node_type", "1: CA\n")
    with pytest.raises(NotReady) as refused:
        _detect(hosts)
    assert str(refused.value) == (
        "irdma0 on e810b runs RoCEv2 (node_type '1: CA', not '4: RNIC'); hil tests iWARP: "
        "switch 0000:17:00.0 to iWARP (devlink dev param set pci/0000:17:00.0 name "
        "enable_roce value false cmode runtime; devlink dev param set pci/0000:17:00.0 "
        "name enable_iwarp value true cmode runtime), or pin it in the link (devlink_params: "
        "{enable_roce: false, enable_iwarp: true}) for pair setup to switch it"
    )


def test_a_claim_of_irdma_that_fell_back_to_siw_is_labelled_siw(hosts: FakeHosts) -> None:
    _fall_back_to_siw(hosts, "e810b")
    mixed = _detect(hosts, dev_b=SIW_DEVICE)
    assert mixed.driver == "irdma+siw"
    assert mixed.describe("e810") == (
        "pair e810 runs irdma on e810a and siw on e810b "
        "(siw fallback on e810b: the inventory says irdma)"
    )
    _fall_back_to_siw(hosts, "e810a")
    both = _detect(hosts, SIW_DEVICE, SIW_DEVICE)
    assert both.describe("e810") == (
        "pair e810 runs siw on both hosts (siw fallback: the inventory says irdma)"
    )
    assert both.profile == siw_profile(5)
