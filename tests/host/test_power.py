"""Power through a ``command`` entry: the controller's real sshd runs the templates.

The netns lab's ns0 is ns1's "power controller": its ``pdu`` script (a file
of the test) logs the namespace it ran in and its arguments, so each test
sees what the controller ran, where, and whether it ran at all.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from netnslab import NetnsLab

from hil.errors import InputError, LeaseLost
from hil.host.hosts import Hosts
from hil.host.power import PowerFailed, power
from hil.inventory import load
from hil.inventory.model import Inventory
from hil.reservation import Claim, Holder, Store

pytestmark = pytest.mark.netns

PAIR = Claim("ns0-ns1", ("ns0", "ns1"))


def powered_inventory(lab: NetnsLab, tmp_path: Path, power_entry: dict[str, Any]) -> Inventory:
    """The lab's inventory with ``power_entry`` on ns1 (``PDU`` in it: the test's script)."""
    pdu = tmp_path / "pdu"
    pdu.write_text(f'#!/bin/sh\necho "$(ip netns identify) $*" >> {tmp_path / "pdu.log"}\n')
    pdu.chmod(0o755)
    doc = yaml.safe_load(lab.inventory_path.read_text())
    entry = yaml.safe_dump(power_entry).replace("PDU", str(pdu))
    doc["hosts"]["ns1"]["power"] = yaml.safe_load(entry)
    path = tmp_path / "inventory.yaml"
    path.write_text(yaml.safe_dump(doc))
    return load(path)


def pdu_log(tmp_path: Path) -> list[str]:
    log = tmp_path / "pdu.log"
    return log.read_text().splitlines() if log.exists() else []


CYCLE = {
    "controller": "ns0",
    "cycle": ["PDU", "cycle", "{outlet}", "{host}"],
    "vars": {"outlet": 3},
}


@pytest.fixture
def hosts(netns_lab: NetnsLab, tmp_path: Path, store: Store) -> Iterator[Hosts]:
    with Hosts(powered_inventory(netns_lab, tmp_path, CYCLE), store) as h:
        yield h


def test_a_cycle_runs_on_the_controller_fenced_first(
    netns_lab: NetnsLab, hosts: Hosts, store: Store, tmp_path: Path
) -> None:
    lease = store.try_acquire([PAIR], Holder.current(), 60)
    assert lease is not None
    fenced: list[str] = []

    def fence() -> None:
        assert pdu_log(tmp_path) == [], "fenced after the power was switched"
        fenced.append(store.fence(lease.id, lease.token).id)

    power(hosts, "ns1", "cycle", fence=fence, timeout=20)
    assert fenced == [lease.id]
    assert pdu_log(tmp_path) == [f"{netns_lab.hosts[0].netns} cycle 3 ns1"]


def test_a_cycle_without_a_cycle_command_is_off_then_on(
    netns_lab: NetnsLab, tmp_path: Path, store: Store
) -> None:
    entry = {"controller": "ns0", "off": ["PDU", "off", "{host}"], "on": ["PDU", "on", "{host}"]}
    with Hosts(powered_inventory(netns_lab, tmp_path, entry), store) as hosts:
        power(hosts, "ns1", "cycle", fence=None, timeout=20)
        ns0 = netns_lab.hosts[0].netns
        assert pdu_log(tmp_path) == [f"{ns0} off ns1", f"{ns0} on ns1"]


def test_an_action_the_entry_lacks_is_bad_input_and_runs_nothing(
    hosts: Hosts, tmp_path: Path
) -> None:
    with pytest.raises(InputError, match="ns1: its power entry has no `off` command"):
        power(hosts, "ns1", "off", fence=None)
    assert pdu_log(tmp_path) == []


def test_a_lease_taken_over_refuses_the_power_and_nothing_runs(
    hosts: Hosts, store: Store, tmp_path: Path
) -> None:
    with pytest.raises(LeaseLost, match="next run"):
        power(hosts, "ns1", "cycle", fence=stale_fence(store))
    assert pdu_log(tmp_path) == []


def test_a_failing_power_command_names_host_action_and_controller(
    netns_lab: NetnsLab, tmp_path: Path, store: Store
) -> None:
    entry = {"controller": "ns0", "cycle": ["false", "{host}"]}
    with (
        Hosts(powered_inventory(netns_lab, tmp_path, entry), store) as hosts,
        pytest.raises(PowerFailed) as e,
    ):
        power(hosts, "ns1", "cycle", fence=None, timeout=20)
    assert str(e.value).startswith("ns1: power cycle through controller ns0 failed: ns0: ")
    assert "check the power controller and the host's power entry" in str(e.value)


def test_a_host_without_power_is_bad_input(hosts: Hosts) -> None:
    with pytest.raises(InputError, match="ns0: the inventory gives it no power entry"):
        power(hosts, "ns0", "off", fence=None)


def stale_fence(store: Store) -> Callable[[], None]:
    """The fence of a run paused past its lease's TTL while the next run took the pair."""
    old = store.try_acquire([PAIR], Holder.current("paused run"), 0.5)
    assert old is not None
    time.sleep(0.7)
    new = store.try_acquire([PAIR], Holder.current("next run"), 60)
    assert new is not None and new.token > old.token

    def fence() -> None:
        store.fence(old.id, old.token)

    return fence
