"""``hil host power`` and ``hil host recover`` as a user runs them, on the netns lab.

ns1 has a ``command`` power entry whose controller is ns0 (real sshd); its
"PDU" is a script of the test that logs what it was asked (tests/host/test_power.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from netnslab.lab import NetnsLab
from test_host_cli import hil, one_line_error

from hil.host.journal import ssh_undo
from hil.reservation import open_store

pytestmark = pytest.mark.netns


@pytest.fixture
def env(netns_lab: NetnsLab, tmp_path: Path) -> tuple[Path, Path]:
    """The lab's inventory with ns1 powered by the test's PDU script, and an empty store."""
    pdu = tmp_path / "pdu"
    pdu.write_text(f'#!/bin/sh\necho "$*" >> {tmp_path / "pdu.log"}\n')
    pdu.chmod(0o755)
    doc = yaml.safe_load(netns_lab.inventory_path.read_text())
    doc["hosts"]["ns1"]["power"] = {"controller": "ns0", "cycle": [str(pdu), "cycle", "{host}"]}
    inventory = tmp_path / "inventory.yaml"
    inventory.write_text(yaml.safe_dump(doc))
    return inventory, tmp_path / "reservations.db"


def pdu_log(env: tuple[Path, Path]) -> list[str]:
    log = env[0].parent / "pdu.log"
    return log.read_text().splitlines() if log.exists() else []


def test_power_cycle_holds_the_pair_then_gives_it_back(env: tuple[Path, Path]) -> None:
    done = hil(*env, "host", "power", "ns1", "cycle")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "ns1: power cycle done\n"
    assert "hil: holding ns0-ns1 under lease " in done.stderr
    assert pdu_log(env) == ["cycle ns1"]
    with open_store(str(env[1])) as store:
        assert store.leases() == []


def test_power_of_a_host_without_power_is_one_line_exit_1(env: tuple[Path, Path]) -> None:
    done = hil(*env, "host", "power", "ns0", "off")
    assert done.returncode == 1
    assert "ns0: the inventory gives it no power entry" in one_line_error(done)


def test_recover_takes_a_quarantined_host_back_into_service(env: tuple[Path, Path]) -> None:
    with open_store(str(env[1])) as store:
        for _ in range(store.quarantine_after()):
            store.record_host_failure("ns1", "kernel_crash", "Kernel panic - not syncing")
    done = hil(*env, "host", "recover", "ns1", "--no-rdma", "--timeout", "60")
    assert done.returncode == 0, done.stderr
    assert "ending the quarantine to take a pair holding it" in done.stderr
    assert done.stdout.startswith("ns1: recovered: ssh ok, agent ok, rdma n/a, journal ok")
    assert pdu_log(env) == ["cycle ns1"]
    with open_store(str(env[1])) as store:
        assert store.host_health(["ns1"])[0].state == "healthy"
        assert store.leases() == []


def test_recover_keeps_a_quarantine_set_by_hand(env: tuple[Path, Path]) -> None:
    with open_store(str(env[1])) as store:
        store.quarantine_host("ns1", "card swapped, waiting for firmware")
    done = hil(*env, "host", "recover", "ns1", "--no-rdma", "--timeout", "60")
    assert done.returncode == 0, done.stderr
    with open_store(str(env[1])) as store:
        health = store.host_health(["ns1"])[0]
    assert (health.state, health.reason, health.manual) == (
        "quarantined",
        "card swapped, waiting for firmware",
        True,
    )
    assert "`hil host release-quarantine ns1` ends it" in done.stderr


def test_a_failed_recovery_exits_5_and_quarantines_again(
    env: tuple[Path, Path], netns_lab: NetnsLab
) -> None:
    doc = yaml.safe_load(env[0].read_text())
    doc["hosts"]["ns1"]["ssh"].update(port=1, connect_timeout=1)  # never comes back
    env[0].write_text(yaml.safe_dump(doc))
    with open_store(str(env[1])) as store:
        for _ in range(store.quarantine_after()):
            store.record_host_failure("ns1", "unreachable", "no SSH")
    done = hil(*env, "host", "recover", "ns1", "--no-rdma", "--timeout", "3")
    assert done.returncode == 5
    assert "hil: error: ns1: recovery failed at step ssh: no SSH within the bound" in done.stderr
    with open_store(str(env[1])) as store:
        health = store.host_health(["ns1"])[0]
        assert store.leases() == []
    assert (health.state, health.reason) == (
        "quarantined",
        "hil host recover failed at step ssh",
    )


def test_lab_check_recover_brings_back_a_host_that_failed_its_check(
    env: tuple[Path, Path], tmp_path: Path
) -> None:
    marker = tmp_path / "undone"
    with open_store(str(env[1])) as store:
        store.journal_add("ns1", "dead-lease", ssh_undo("ns1", ["touch", str(marker)], "undo Z"))
    plain = hil(*env, "lab-check", "--no-rdma")
    assert plain.returncode == 5 and "entries left by a dead run" in plain.stdout
    assert pdu_log(env) == [] and not marker.exists()
    done = hil(*env, "lab-check", "--no-rdma", "--recover")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "hil: ns1 failed the check (journal: 1 entries left by a dead run" in done.stderr
    assert pdu_log(env) == ["cycle ns1"] and marker.exists()
    assert done.stdout.strip().endswith("lab-check: 2 hosts healthy")
