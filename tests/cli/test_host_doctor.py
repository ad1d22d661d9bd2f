"""``hil host doctor``: its table, --json and exit codes on the recorded T6 pair (the
agent boundary faked, tests/fake_hosts.py), and on the real netns lab's hosts, which
have no RDMA (SSH, the agent and sysfs real)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fake_hosts import T6_DATA, FakeHosts, t6_hosts
from netnslab.lab import NetnsLab
from test_host_cli import hil

from hil.cli import host_doctor, main
from hil.inventory.model import Inventory

INVENTORY = str(T6_DATA / "inventory.yaml")


@pytest.fixture
def t6(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeHosts:
    """The recorded T6 pair stands where doctor's Hosts would connect over SSH."""
    hosts = t6_hosts(tmp_path)

    def connect(inventory: Inventory) -> FakeHosts:
        hosts.inventory = inventory
        return hosts

    monkeypatch.setattr(host_doctor, "Hosts", connect)
    return hosts


def _doctor(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(["--inventory", INVENTORY, "host", "doctor", *argv])
    out, err = capsys.readouterr()
    return status, out, err


def test_a_clean_pair_prints_its_table_and_exits_0(
    t6: FakeHosts, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, _ = _doctor(capsys, "t6")
    lines = out.splitlines()
    assert status == 0
    assert lines[0].split() == ["CHECK", "HOST", "STATUS", "SEEN", "FIX"]
    assert lines[1].split()[:4] == ["rdma-device", "t6a", "ok", "cxgb4_0"]
    assert lines[-1] == "t6: ready"
    assert "FAIL" not in out


def test_a_failing_check_shows_its_fix_and_exits_5(
    t6: FakeHosts, capsys: pytest.CaptureFixture[str]
) -> None:
    t6.recorded("t6b").record("pgrep -x iwpmd", status=1)
    status, out, _ = _doctor(capsys, "t6")
    assert status == 5
    (row,) = [line for line in out.splitlines() if " FAIL " in line]
    assert row.split()[:3] == ["iwpmd", "t6b", "FAIL"]
    words = " ".join(out.split())  # SEEN and FIX wrap
    assert "not running (expected running (iw_cxgb4 maps its ports))" in words
    assert "systemctl enable --now iwpmd" in words
    assert out.splitlines()[-1] == "t6: NOT READY: 1 failing checks (see FIX)"


def test_json_and_a_host_alone(t6: FakeHosts, capsys: pytest.CaptureFixture[str]) -> None:
    t6.recorded("t6a").write("/sys/class/net/enp129s0f4/speed", "25000\n")
    status, out, _ = _doctor(capsys, "--json", "t6a")
    doc = json.loads(out)
    assert (status, doc["target"], doc["ok"]) == (5, "t6a", False)
    assert {f["host"] for f in doc["findings"]} == {"t6a"}
    (speed,) = [f for f in doc["findings"] if f["check"] == "link-speed"]
    assert speed == {
        "check": "link-speed",
        "host": "t6a",
        "status": "fail",
        "seen": "25000 Mb/s on enp129s0f4",
        "expected": "100000 Mb/s",
        "fix": speed["fix"],
        "port": "",  # named only on a host with several ports
    }


def test_an_unknown_name_is_one_line_and_exits_1(
    t6: FakeHosts, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, err = _doctor(capsys, "t7")
    assert (status, out) == (1, "")
    assert err == (f"hil: error: {INVENTORY}: no host or pair 't7' (hosts: t6a, t6b; pairs: t6)\n")


@pytest.mark.netns
def test_real_hosts_without_rdma_fail_the_rdma_checks(netns_lab: NetnsLab, tmp_path: Path) -> None:
    store = tmp_path / "store.db"
    done = hil(netns_lab.inventory_path, store, "host", "doctor", "ns0")
    assert done.returncode == 5, done.stderr
    assert done.stdout.splitlines()[1].split()[:3] == ["rdma-device", "ns0", "FAIL"]
    assert done.stdout.splitlines()[-1] == "ns0: NOT READY: 1 failing checks (see FIX)"
    doc = json.loads(hil(netns_lab.inventory_path, store, "host", "doctor", "--json", "ns0").stdout)
    (failing,) = [f for f in doc["findings"] if f["status"] == "fail"]
    assert failing["check"] == "rdma-device" and "RDMA is unavailable" in failing["seen"]
