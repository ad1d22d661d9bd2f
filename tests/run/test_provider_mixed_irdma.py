"""The mixed pairs iw_cxgb4+irdma and siw+irdma on the recorded hosts (tests/data/t6's t6a,
tests/data/e810's e810a and e810b): each host gets the profile of its own provider, the pair
is judged by a PairProfile, doctor passes, and devlink_params touch the irdma end only."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from fake_hosts import (
    E810_DATA,
    E810_NETDEV,
    KALLSYMS_GREP,
    T6_DATA,
    FakeAgent,
    FakeHosts,
    e810_inventory,
    t6_inventory,
)

from hil.host.devlinkparams import pin_devlink
from hil.host.journal import Journal
from hil.host.pairsetup import PairState, PortState
from hil.host.readiness import pair_readiness
from hil.inventory.model import Host, Inventory, Link, LinkEnd, PinnedDevlink, Pull
from hil.judge.profiles import IRDMA, PairProfile, cxgb4_profile, siw_profile
from hil.reservation import Store
from hil.run.provider import Provider, detect

SIW_DEVICE = f"siw_{E810_NETDEV}"


def _mixed(tmp_path: Path, a: Host, b: Host, devlink: tuple[PinnedDevlink, ...] = ()) -> FakeHosts:
    """The recorded hosts ``a`` and ``b`` joined by link ``mixed``."""
    link = Link("mixed", LinkEnd(a.name, "p0"), LinkEnd(b.name, "p0"), pulls=(Pull("admin"),))
    link = dataclasses.replace(link, devlink_params=devlink)
    inv = Inventory(Path("mixed.yaml"), hosts={a.name: a, b.name: b}, links={"mixed": link})
    data = {"t6a": T6_DATA, "e810a": E810_DATA, "e810b": E810_DATA}
    agents: dict[str, FakeAgent] = {
        h.name: FakeAgent.recorded(h.name, data[h.name] / h.name, tmp_path) for h in (a, b)
    }
    return FakeHosts(inv, agents=agents)


def _t6_e810(tmp_path: Path, devlink: tuple[PinnedDevlink, ...] = ()) -> FakeHosts:
    return _mixed(tmp_path, t6_inventory().hosts["t6a"], e810_inventory().hosts["e810b"], devlink)


def _siw_e810(tmp_path: Path) -> FakeHosts:
    """e810a's port run by siw (its inventory says so), opposite e810b's irdma."""
    e810a = e810_inventory().hosts["e810a"]
    port = dataclasses.replace(e810a.rnics[0], driver="siw", rdma_device=SIW_DEVICE)
    hosts = _mixed(
        tmp_path, dataclasses.replace(e810a, rnics=(port,)), e810_inventory().hosts["e810b"]
    )
    agent = hosts.recorded("e810a")
    agent.write(f"/sys/class/infiniband/{SIW_DEVICE}/node_desc", "Software iWARP stack\n")
    agent.record(KALLSYMS_GREP, "siw_netdev_down\n")  # a 6.1 siw, no KASAN
    agent.rdma_devices[SIW_DEVICE] = E810_NETDEV  # rdma link add ... type siw, as setup does
    agent.sysctls |= {"net.ipv4.tcp_retries2": "5", "net.ipv4.tcp_syn_retries": "6"}
    return hosts


def _detect(hosts: FakeHosts) -> Provider:
    pair = hosts.inventory.pair("mixed")
    a, b = (
        PortState(h.name, "p0", r.netdev, None, 9000, r.rdma_device, False)
        for h, r in ((pair.host_a, pair.rnic_a), (pair.host_b, pair.rnic_b))
    )
    return detect(hosts, pair, PairState("mixed", a, b, True))  # type: ignore[arg-type]


def test_iw_cxgb4_and_irdma_are_each_judged_by_their_own_profile(tmp_path: Path) -> None:
    provider = _detect(_t6_e810(tmp_path))
    assert [h.driver for h in provider.hosts] == ["iw_cxgb4", "irdma"]
    assert provider.driver == "iw_cxgb4+irdma"
    profile = provider.profile
    assert profile == PairProfile((("t6a", cxgb4_profile(60)), ("e810b", IRDMA)))
    # irdma's CM retransmits a SYN for 363 s; iw_cxgb4 gives up after ep_timeout_secs
    assert profile.of("e810b").conn_sent_destroy_bound_s == IRDMA.conn_sent_destroy_bound_s
    assert profile.of("t6a").conn_sent_destroy_bound_s == 65.0
    assert provider.describe("mixed") == "pair mixed runs iw_cxgb4 on t6a and irdma on e810b"


def test_siw_and_irdma_are_each_judged_by_their_own_profile(tmp_path: Path) -> None:
    provider = _detect(_siw_e810(tmp_path))
    assert provider.driver == "siw+irdma"
    assert provider.profile == PairProfile((("e810a", siw_profile(5)), ("e810b", IRDMA)))
    assert provider.describe("mixed") == "pair mixed runs siw on e810a and irdma on e810b"


def test_doctor_passes_a_mixed_pair_and_compares_no_parameters_across_drivers(
    tmp_path: Path,
) -> None:
    for hosts in (_t6_e810(tmp_path / "t6"), _siw_e810(tmp_path / "siw")):
        r = pair_readiness(hosts, hosts.inventory.pair("mixed"))  # type: ignore[arg-type]
        assert r.ok, r.refusal()
        checks = {f.check for f in r.findings}
        assert "rdma-mode" in checks and not {"devlink-params", "devlink-param"} & checks


def test_devlink_params_are_pinned_on_the_irdma_end_only(tmp_path: Path, store: Store) -> None:
    pins = (PinnedDevlink("local_forwarding", "disabled"),)
    hosts = _t6_e810(tmp_path, pins)
    hosts.store = store
    journal = Journal(hosts, store, "lease-1")  # type: ignore[arg-type]
    pair = hosts.inventory.pair("mixed")
    pinned = pin_devlink(hosts, pair, pins, journal)  # type: ignore[arg-type]
    assert pinned == {"e810b": {"devlink.local_forwarding": "disabled"}}
    assert hosts.agent("t6a").calls == [] and store.journal_entries("t6a") == []
    journal.close().check("teardown")
    assert store.journal_entries("e810b") == []
