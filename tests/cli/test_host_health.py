"""``hil host health|quarantine|release-quarantine|quarantine-after`` (the store only:
the recorded T6 pair's inventory names the hosts, nothing connects) and ``hil
lab-check`` against the netns lab's real sshd and agents, as a user runs them."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from fake_hosts import T6_DATA
from netnslab.lab import NetnsLab
from test_host_cli import hil, one_line_error

from hil.cli import main
from hil.reservation import open_store

INVENTORY = str(T6_DATA / "inventory.yaml")
Run = Callable[..., tuple[int, str, str]]


@pytest.fixture
def run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Run:
    """``hil --inventory T6 --store tmp ARGV...`` in process: (status, stdout, stderr)."""
    store = str(tmp_path / "reservations.db")

    def call(*argv: str) -> tuple[int, str, str]:
        status = main(["--inventory", INVENTORY, "--store", store, *argv])
        out, err = capsys.readouterr()
        return status, out, err

    return call


def test_every_host_starts_healthy(run: Run) -> None:
    status, out, _ = run("host", "health")
    lines = out.splitlines()
    assert status == 0
    assert lines[0].split() == ["HOST", "STATE", "SINCE", "FAILURES", "REASON"]
    assert [line.split() for line in lines[1:]] == [
        ["t6a", "healthy", "-", "0", "-"],
        ["t6b", "healthy", "-", "0", "-"],
    ]


def test_quarantine_shows_reason_and_since_until_released(run: Run) -> None:
    status, out, _ = run("host", "quarantine", "t6b", "--reason", "cxgb4 firmware crash")
    assert status == 0
    assert out.startswith("t6b: quarantined since ") and "cxgb4 firmware crash" in out
    status, out, _ = run("host", "health", "t6b", "--json")
    doc = json.loads(out)
    assert (doc["host"], doc["state"], doc["manual"]) == ("t6b", "quarantined", True)
    assert doc["reason"] == "cxgb4 firmware crash" and doc["since"]
    assert [r["event"] for r in doc["history"]] == ["quarantine"]
    status, out, _ = run("host", "health", "t6b")
    assert "quarantined (by hand)" in out and "history (last 20):" in out
    status, out, err = run("reserve", "--pair", "t6")
    assert status == 5
    assert "pair t6 (t6a, t6b) is out: host t6b: quarantined since" in err
    assert "cxgb4 firmware crash" in err
    status, out, _ = run("host", "release-quarantine", "t6b")
    assert (status, out) == (0, "t6b: healthy since " + out.split("since ")[1])
    status, out, _ = run("host", "health", "--json")
    assert [h["state"] for h in json.loads(out)["hosts"]] == ["healthy", "healthy"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("host", "quarantine", "t6c", "--reason", "x"), "no host 't6c' (hosts: t6a, t6b)"),
        (("host", "health", "t6c"), "no host 't6c' (hosts: t6a, t6b)"),
        (("host", "release-quarantine", "t6c"), "no host 't6c'"),
        (("host", "quarantine", "t6a", "--reason", "  "), "needs a reason (--reason TEXT)"),
        (("host", "release-quarantine", "t6a"), "host t6a is not quarantined (t6a: healthy)"),
        (("host", "quarantine-after", "0"), "at least 1 failure, got 0"),
    ],
)
def test_bad_input_exits_1_with_one_line(run: Run, argv: tuple[str, ...], message: str) -> None:
    status, _, err = run(*argv)
    assert status == 1
    assert len(err.strip().splitlines()) == 1 and message in err, err


def test_a_missing_reason_is_a_usage_error(run: Run) -> None:
    with pytest.raises(SystemExit) as e:
        run("host", "quarantine", "t6a")
    assert e.value.code == 1


def test_quarantine_after_is_a_store_setting(run: Run, tmp_path: Path) -> None:
    status, out, _ = run("host", "quarantine-after")
    assert (status, out) == (
        0,
        "a host is quarantined after 3 consecutive infrastructure failures\n",
    )
    status, out, _ = run("host", "quarantine-after", "2")
    assert "after 2 consecutive" in out
    with open_store(str(tmp_path / "reservations.db")) as store:
        assert store.quarantine_after() == 2


# -- lab-check on the netns lab ---------------------------------------------------


def test_lab_check_passes_healthy_hosts_without_rdma(netns_lab: NetnsLab, tmp_path: Path) -> None:
    done = hil(netns_lab.inventory_path, tmp_path / "s.db", "lab-check", "--no-rdma")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].split() == ["HOST", "CHECK", "STATUS", "SEEN"]
    assert [line.split()[:3] for line in lines[1:9]] == [
        [host, check, status]
        for host in ("ns0", "ns1")
        for check, status in (("ssh", "ok"), ("agent", "ok"), ("rdma", "n/a"), ("journal", "ok"))
    ]
    assert lines[-1] == "lab-check: 2 hosts healthy"


def test_lab_check_fails_on_real_missing_rdma_and_counts_it(
    netns_lab: NetnsLab, tmp_path: Path
) -> None:
    store = tmp_path / "s.db"
    done = hil(netns_lab.inventory_path, store, "lab-check", "--pair", "ns0-ns1", "--json")
    assert done.returncode == 5, done.stderr
    doc = json.loads(done.stdout)
    assert doc["ok"] is False
    for host in doc["hosts"]:
        rdma = [c for c in host["checks"] if c["check"] == "rdma"]
        assert rdma[0]["status"] == "fail" and "no RDMA netlink" in rdma[0]["seen"]
        assert host["health"]["state"] == "suspect"
    done = hil(netns_lab.inventory_path, store, "lab-check", "--no-rdma")
    assert done.returncode == 0, done.stdout  # a pass heals
    assert "quarantined" not in done.stdout


def test_lab_check_exits_5_for_a_host_quarantined_by_hand(
    netns_lab: NetnsLab, tmp_path: Path
) -> None:
    store = tmp_path / "s.db"
    assert (
        hil(
            netns_lab.inventory_path, store, "host", "quarantine", "ns1", "--reason", "rack move"
        ).returncode
        == 0
    )
    done = hil(netns_lab.inventory_path, store, "lab-check", "--no-rdma")
    assert done.returncode == 5
    assert " FAIL " not in done.stdout  # every check passed; the quarantine stays
    assert "rack move" in done.stdout
    assert done.stdout.splitlines()[-1] == "lab-check: NOT HEALTHY: quarantined: ns1"


def test_lab_check_names_an_unknown_pair(netns_lab: NetnsLab, tmp_path: Path) -> None:
    done = hil(netns_lab.inventory_path, tmp_path / "s.db", "lab-check", "--pair", "nope")
    assert done.returncode == 1
    assert "nope" in one_line_error(done)


def test_status_names_the_hosts_out_of_service_until_released(run: Run) -> None:
    status, out, _ = run("status")
    assert status == 0 and "not healthy" not in out
    run("host", "quarantine", "t6b", "--reason", "cxgb4 firmware crash")
    status, out, _ = run("status")
    assert status == 0
    (line,) = [ln for ln in out.splitlines() if ln.startswith("not healthy: ")]
    assert line.startswith("not healthy: t6b: quarantined since ")
    assert line.endswith("cxgb4 firmware crash")
    status, out, _ = run("status", "--json")
    doc = json.loads(out)
    assert [(h["host"], h["state"]) for h in doc["hosts_not_healthy"]] == [("t6b", "quarantined")]
    run("host", "release-quarantine", "t6b")
    status, out, _ = run("status", "--json")
    assert json.loads(out)["hosts_not_healthy"] == []
