"""Where a pair run's tests read each host's hardware evidence (``PairFacts.targets``).

On the recorded T6 pair (tests/fake_hosts.py): the run's own provider and
pair state say which netdev, device and driver each host uses.  The whole
way, with the real ethtool of siw guests, runs in
tests/plugin/test_plugin_fixtures_lab.py.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

from fake_hosts import T6_NETDEV, t6_hosts

from hil.errors import InputError
from hil.host.pairsetup import PortState
from hil.run.pairfacts import PairFacts
from hil.run.provider import HostProvider

DIR = "/sys/kernel/debug/iw_cxgb4/0000:81:00.4"


def _targets(facts: PairFacts, run: Any) -> Any:
    return facts.targets(run.provider, run.state)


def _facts(run: Any) -> PairFacts:
    return PairFacts(run.hosts, ("t6a", "t6b"))


def _run(tmp_path: Path, b_driver: str = "iw_cxgb4", provider: Any = None) -> Any:
    def port(host: str, device: str) -> PortState:
        return PortState(host, "p0", T6_NETDEV, None, 9000, device, device == "siw0")

    b_device = "cxgb4_0" if b_driver == "iw_cxgb4" else "siw0"
    hosts = (
        HostProvider("t6a", "cxgb4_0", "iw_cxgb4", False),
        HostProvider("t6b", b_device, b_driver, b_device == "siw0"),
    )
    return SimpleNamespace(
        hosts=t6_hosts(tmp_path),
        provider=provider or SimpleNamespace(hosts=hosts),
        state=SimpleNamespace(a=port("t6a", "cxgb4_0"), b=port("t6b", b_device)),
    )


def test_each_host_gets_its_netdev_and_its_drivers_debugfs(tmp_path: Path) -> None:
    run = _run(tmp_path)
    facts = _facts(run)
    found = _targets(facts, run)
    assert {h: (t.netdev, t.debugfs) for h, t in found.items()} == {
        "t6a": (T6_NETDEV, DIR),
        "t6b": (T6_NETDEV, DIR),
    }
    assert _targets(facts, _run(tmp_path / "again")) is found  # once per pair run


def test_a_mixed_pairs_siw_side_has_its_debugfs_absent(tmp_path: Path) -> None:
    run = _run(tmp_path, b_driver="siw")
    found = _targets(_facts(run), run)
    assert found["t6a"].debugfs == DIR
    assert found["t6b"].debugfs is None and "siw has no debugfs" in found["t6b"].absent


def test_a_run_without_provider_gives_no_targets_not_an_error(tmp_path: Path) -> None:
    class NoProvider:
        @property
        def hosts(self) -> Any:
            raise InputError("pair t6 was set up without RDMA (rdma=False)")

    run = _run(tmp_path, provider=NoProvider())
    facts = _facts(run)
    assert _targets(facts, run) == {}
    assert "set up without RDMA" in facts.targets_note
