"""``hil lab-check`` on the virtual lab's real siw guests: SSH, the agent and the
kernel's RDMA devices real.  The guests' siw devices are the inventory's
``rdma_device``, so "RDMA device present" is checked for real here (the netns
lab has no RDMA); a port naming a device the guest lacks, without a fallback,
fails it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from vlab import VirtualLab

pytestmark = pytest.mark.lab

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 300.0  # agents started on two TCG guests


def _lab_check(inventory: Path, store: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "hil", "--inventory", str(inventory), "--store", str(store)]
    return subprocess.run(
        [*cmd, "lab-check", "--json", *argv],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        cwd=ROOT,
        check=False,
    )


def _rdma(done: subprocess.CompletedProcess[str]) -> dict[str, list[tuple[str, str]]]:
    doc = json.loads(done.stdout)
    return {
        h["host"]: [(c["status"], c["seen"]) for c in h["checks"] if c["check"] == "rdma"]
        for h in doc["hosts"]
    }


def test_the_lab_hosts_are_healthy_with_their_rdma_devices(
    virtual_lab: VirtualLab, tmp_path: Path
) -> None:
    done = _lab_check(Path(virtual_lab.inventory.path), tmp_path / "s.db")
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    pair = virtual_lab.pair
    for host, rnic in ((pair.host_a.name, pair.rnic_a), (pair.host_b.name, pair.rnic_b)):
        checks = _rdma(done)[host]
        assert (
            "ok",
            f"port {rnic.name} ({rnic.netdev}): {rnic.rdma_device} present (inventory)",
        ) in checks


def test_a_device_the_guest_lacks_fails_the_check(virtual_lab: VirtualLab, tmp_path: Path) -> None:
    doc = yaml.safe_load(Path(virtual_lab.inventory.path).read_text())
    host = virtual_lab.pair.host_b.name
    for rnic in doc["hosts"][host]["rnics"]:
        rnic["rdma_device"] = "nosuchdev0"
        rnic.pop("fallback", None)
    inventory = tmp_path / "inventory.yaml"
    inventory.write_text(yaml.safe_dump(doc, sort_keys=False))
    store = tmp_path / "s.db"
    done = _lab_check(inventory, store, "--pair", virtual_lab.pair.name)
    assert done.returncode == 5, f"{done.stdout}\n{done.stderr}"
    [(status, seen), *_] = _rdma(done)[host]
    assert status == "fail" and "RDMA device nosuchdev0 is absent" in seen
    hosts = {h["host"]: h for h in json.loads(done.stdout)["hosts"]}
    assert hosts[host]["health"]["state"] == "suspect"
    assert hosts[host]["health"]["reason"].startswith("rdma_device: ")
    assert hosts[virtual_lab.pair.host_a.name]["ok"] is True
