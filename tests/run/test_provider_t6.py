"""Provider detection on the recorded Chelsio T6 pair (tests/data/t6, tests/fake_hosts.py).

What the recorded hosts' sysfs says (node_desc, the PCI driver, iw_cxgb4's
``ep_timeout_secs``) makes each host's profile; a host whose
``ep_timeout_secs`` was changed gets bounds of its own, and a host that fell
back to siw makes the pair a mixed one, judged by each host's own profile.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from fake_hosts import KALLSYMS_GREP, T6_NETDEV, FakeHosts, t6_hosts, t6_inventory

from hil.host.pairsetup import PairState, PortState
from hil.judge.profiles import PairProfile, cxgb4_profile, siw_profile
from hil.run.provider import Provider, detect

EP_TIMEOUT = "/sys/module/iw_cxgb4/parameters/ep_timeout_secs"
SIW_DEVICE = f"siw_{T6_NETDEV}"


@pytest.fixture
def hosts(tmp_path: Path) -> FakeHosts:
    return t6_hosts(tmp_path)


def _detect(hosts: FakeHosts, dev_b: str = "cxgb4_0") -> Provider:
    ports = [
        PortState(h, "p0", T6_NETDEV, None, 9000, dev, dev != "cxgb4_0")
        for h, dev in (("t6a", "cxgb4_0"), ("t6b", dev_b))
    ]
    return detect(hosts, t6_inventory().pair("t6"), PairState("t6", ports[0], ports[1], True))  # type: ignore[arg-type]


def test_the_recorded_pair_runs_iw_cxgb4_with_the_default_ep_timeout(hosts: FakeHosts) -> None:
    provider = _detect(hosts)
    assert provider.driver == "iw_cxgb4"
    assert [h.settings for h in provider.hosts] == [{"ep_timeout_secs": "60"}] * 2
    assert provider.profile == cxgb4_profile(60)
    assert provider.describe("t6") == "pair t6 runs iw_cxgb4 on both hosts"


def test_each_hosts_ep_timeout_secs_bounds_its_own_actions(hosts: FakeHosts) -> None:
    hosts.recorded("t6a").write(EP_TIMEOUT, "10\n")
    profile = _detect(hosts).profile
    assert profile == PairProfile((("t6a", cxgb4_profile(10)), ("t6b", cxgb4_profile(60))))
    assert profile.name == "iw_cxgb4"
    a, b = profile.of("t6a"), profile.of("t6b")
    assert (a.local_close_bound_s, a.conn_sent_destroy_bound_s) == (15.0, 15.0)
    assert (b.local_close_bound_s, b.conn_sent_destroy_bound_s) == (65.0, 65.0)


def test_a_t6_host_and_a_siw_fallback_make_a_mixed_pair(hosts: FakeHosts) -> None:
    t6b = hosts.recorded("t6b")
    t6b.write(f"/sys/class/infiniband/{SIW_DEVICE}/node_desc", "Software iWARP stack\n")
    t6b.record(KALLSYMS_GREP, "siw_netdev_down\n")  # a 6.1 siw, no KASAN
    t6b.sysctls["net.ipv4.tcp_retries2"] = "5"
    t6b.sysctls["net.ipv4.tcp_syn_retries"] = "6"
    provider = _detect(hosts, dev_b=SIW_DEVICE)
    assert provider.driver == "iw_cxgb4+siw"
    assert [h.fallback for h in provider.hosts] == [False, True]
    profile = provider.profile
    assert profile == PairProfile((("t6a", cxgb4_profile(60)), ("t6b", siw_profile(5))))
    assert profile.name == "iw_cxgb4+siw"
    assert provider.describe("t6") == (
        "pair t6 runs iw_cxgb4 on t6a and siw on t6b "
        "(siw fallback on t6b: the inventory says iw_cxgb4)"
    )


def test_a_chelsio_device_is_known_by_its_pci_driver_when_node_desc_is_renamed(
    hosts: FakeHosts,
) -> None:
    # readlink -f follows the recorded symlinks: cxgb4_0/device -> the PCI function -> cxgb4.
    hosts.recorded("t6a").write("/sys/class/infiniband/cxgb4_0/node_desc", "t6a port 0\n")
    assert _detect(hosts).hosts[0].driver == "iw_cxgb4"
