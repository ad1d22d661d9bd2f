"""``hil host doctor`` on the virtual lab's real siw guests (SSH, the agent, sysfs,
rdma and pgrep real): the lab's pair is ready; an inventory that claims Chelsio
RNICs the guests lack is ready on the siw fallback with a warning; ends whose
inventory MTUs differ are not ready."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from vlab import VirtualLab

pytestmark = pytest.mark.lab

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 300.0  # agents started on two TCG guests


def _doctor(lab: VirtualLab, inventory: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "hil", "--inventory", str(inventory), "host", "doctor"]
    return subprocess.run(
        [*cmd, *argv, lab.pair.name],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        cwd=ROOT,
        check=False,
    )


def _changed(lab: VirtualLab, path: Path, **port: Any) -> Path:
    """The lab's inventory with these values on the ports of its pair (``{end}`` per end)."""
    doc = yaml.safe_load(Path(lab.inventory.path).read_text())
    for i, end in enumerate((lab.pair.host_a.name, lab.pair.host_b.name)):
        for rnic in doc["hosts"][end]["rnics"]:
            rnic.update({k: v[i] if isinstance(v, tuple) else v for k, v in port.items()})
    if port.get("driver") == "iw_cxgb4":  # the inventory refuses blackhole pulls of offloaded links
        for link in doc["links"].values():
            link["pull"] = [p for p in link.get("pull", []) if p["mode"] != "blackhole"]
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def _statuses(done: subprocess.CompletedProcess[str]) -> dict[tuple[str, str], str]:
    doc = json.loads(done.stdout)
    return {(f["host"], f["check"]): f["status"] for f in doc["findings"]}


def test_the_lab_pair_is_ready(virtual_lab: VirtualLab) -> None:
    table = _doctor(virtual_lab, Path(virtual_lab.inventory.path))
    print(table.stdout)  # the table, for -s
    assert table.returncode == 0, f"{table.stdout}\n{table.stderr}"
    assert table.stdout.splitlines()[-1] == f"{virtual_lab.pair.name}: ready"
    assert " FAIL " not in table.stdout and " WARN " not in table.stdout
    found = _statuses(_doctor(virtual_lab, Path(virtual_lab.inventory.path), "--json"))
    for host in (virtual_lab.pair.host_a.name, virtual_lab.pair.host_b.name):
        assert found[host, "rdma-device"] == found[host, "device-driver"] == "ok"
        assert found[host, "device-port"] == "ok"
        assert found[host, "iwpmd"] == "info"  # siw maps no ports
    assert found[virtual_lab.pair.name, "mtu-ends"] == "ok"


def test_claimed_chelsio_runs_on_the_siw_fallback_with_a_warning(
    virtual_lab: VirtualLab, tmp_path: Path
) -> None:
    inventory = _changed(
        virtual_lab, tmp_path / "cxgb4.yaml", driver="iw_cxgb4", rdma_device="cxgb4_0"
    )
    done = _doctor(virtual_lab, inventory, "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    found = _statuses(done)
    host = virtual_lab.pair.host_a.name
    assert (found[host, "rdma-device"], found[host, "device-driver"]) == ("warn", "ok")


def test_ends_with_different_mtus_are_not_ready(virtual_lab: VirtualLab, tmp_path: Path) -> None:
    inventory = _changed(virtual_lab, tmp_path / "mtu.yaml", mtu=(1500, 1400))
    done = _doctor(virtual_lab, inventory)
    assert done.returncode == 5, done.stdout + done.stderr
    assert done.stdout.splitlines()[-1].endswith("NOT READY: 1 failing checks (see FIX)")
    assert "mtu-ends" in done.stdout and "the ends differ" in done.stdout
