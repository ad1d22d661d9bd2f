"""``hil inventory check|show`` through the real console script."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from netnslab.lab import NetnsLab

from hil.inventory import load

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = "inventory/example-lab.yaml"

# The conftest's ``hil`` fixture: run the console script with these arguments.
Hil = Callable[..., subprocess.CompletedProcess[str]]


def test_check_example(hil: Hil) -> None:
    done = hil("inventory", "check", EXAMPLE)
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == f"{EXAMPLE}: ok (11 hosts, 4 links)\n"


def test_check_reports_every_file(hil: Hil, tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("hosts:\n  a:\n    ssh: {host: a, prot: 22}\n")
    missing = tmp_path / "missing.yaml"
    done = hil("inventory", "check", str(bad), str(REPO / EXAMPLE), str(missing))
    assert done.returncode == 1
    assert done.stdout == f"{REPO / EXAMPLE}: ok (11 hosts, 4 links)\n"
    assert done.stderr.splitlines() == [
        f"{bad}:3: hosts.a.ssh.prot: unknown key 'prot' (did you mean 'port'? allowed: "
        "connect_timeout, host, host_key_policy, identity_file, jump, key_passphrase, "
        "known_hosts, password, port, sudo, user)",
        f"{missing}: cannot read inventory: No such file or directory",
    ]


def test_check_without_file_uses_global_inventory_option(hil: Hil) -> None:
    done = hil("--inventory", EXAMPLE, "inventory", "check")
    assert (done.returncode, done.stdout) == (0, f"{EXAMPLE}: ok (11 hosts, 4 links)\n")


def test_no_inventory_at_all_is_bad_input(hil: Hil) -> None:
    for action in ("check", "show"):
        done = hil("inventory", action)
        assert done.returncode == 1
        assert (
            done.stderr == "hil: error: no inventory: pass --inventory FILE or set HIL_INVENTORY\n"
        )


def test_show_tables(hil: Hil) -> None:
    done = hil("inventory", "show", EXAMPLE)
    assert (done.returncode, done.stderr) == (0, "")
    lines = [line.split() for line in done.stdout.splitlines()]
    assert ["t6-a", "root@t6-a.lab.example:22", "via", "bastion", "t6,rack3"] in lines
    assert ["t6-a", "p0", "enp1s0f4", "iw_cxgb4", "cxgb4_0", "198.18.1.1/24", "9000", "25000",
            "1.27.4.0", "-"] in lines  # fmt: skip
    assert ["gen-b", "p0", "eno2", "siw", "-", "198.18.4.2/24", "1500", "10000", "-",
            "siw"] in lines  # fmt: skip
    assert ["t6-pair-1", "t6-a:p0", "t6-b:p0", "t6,chelsio", "admin,command",
            "ends", "middlebox", "mbox-1", "t6-b,t6-a"] in lines  # fmt: skip
    assert ["siw-pair-1", "gen-a:p0", "gen-b:p0", "siw", "admin,blackhole", "ends", "netem",
            "-"] in lines  # fmt: skip


def test_show_require_filters_pairs(hil: Hil) -> None:
    done = hil(
        "inventory", "show", EXAMPLE, "--require", "driver=iw_cxgb4", "--require", "mtu<9000"
    )
    assert done.returncode == 0
    assert "pairs meeting driver=iw_cxgb4 mtu<9000: 1 of 4" in done.stdout
    pairs = [line.split()[0] for line in done.stdout.split("PAIR", 1)[1].splitlines()[1:]]
    assert pairs == ["t5-pair-1"]


def test_show_bad_requirement_is_one_line(hil: Hil) -> None:
    done = hil("inventory", "show", EXAMPLE, "--require", "speed>=fast")
    assert done.returncode == 1
    assert done.stderr == (
        "hil: error: bad requirement 'speed>=fast': 'fast' is not a whole number\n"
    )


def test_show_bad_inventory_is_located(hil: Hil, tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("hosts:\n  a:\n    ssh: {host: a, port: many}\n")
    done = hil("inventory", "show", str(bad))
    assert done.returncode == 1
    assert done.stderr == (
        f"hil: error: {bad}:3: hosts.a.ssh.port: expected an integer, got a string 'many'\n"
    )


def test_show_json_round_trip(hil: Hil, tmp_path: Path) -> None:
    done = hil("inventory", "show", EXAMPLE, "--json")
    assert (done.returncode, done.stderr) == (0, "")
    doc = json.loads(done.stdout)
    assert set(doc) == {"version", "hosts", "links", "pairs"}
    assert doc["hosts"]["t5-a"]["rnics"][1]["address"] == "fd00:198:18:3::1/64"
    assert doc["pairs"][0] == {
        "name": "t6-pair-1",
        "hosts": ["t6-a", "t6-b"],
        "ends": ["t6-a:p0", "t6-b:p0"],
        "tags": ["t6", "chelsio"],
        "pulls": ["admin", "command"],
    }
    # The hosts and links of the JSON are themselves a valid inventory that
    # loads into the same hosts and links as the file it came from.
    del doc["pairs"]
    again = tmp_path / "again.json"
    again.write_text(json.dumps(doc))
    check = hil("inventory", "check", str(again))
    assert (check.returncode, check.stdout) == (0, f"{again}: ok (11 hosts, 4 links)\n")
    original = load(REPO / EXAMPLE)
    reloaded = load(again)
    assert (reloaded.hosts, reloaded.links) == (original.hosts, original.links)


def test_show_json_with_require(hil: Hil) -> None:
    done = hil("inventory", "show", EXAMPLE, "--json", "--require", "fallback=siw")
    doc = json.loads(done.stdout)
    assert [p["name"] for p in doc["pairs"]] == ["siw-pair-1"]
    assert len(doc["links"]) == 4  # the inventory itself is shown whole


def test_help_lists_inventory_actions(hil: Hil) -> None:
    done = hil("inventory", "--help")
    assert done.returncode == 0
    assert "check" in done.stdout and "show" in done.stdout


@pytest.mark.netns
def test_check_peers_asks_each_peer_host_for_its_route(
    hil: Hil, netns_lab: NetnsLab, tmp_path: Path
) -> None:
    lab = str(netns_lab.inventory_path)
    done = hil("inventory", "check", "--peers", lab)
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.splitlines() == [
        f"{lab}: ns0-ns1: peer host ns1 -> DUT ns0:p0 198.18.0.1: routed from 198.18.0.2",
        f"{lab}: ns0-ns1: peer host ns0 -> DUT ns1:p0 198.18.0.2: routed from 198.18.0.1",
        f"{lab}: ok (2 hosts, 1 links)",
    ]


@pytest.mark.netns
def test_check_peers_refuses_a_peer_host_without_a_route(
    hil: Hil, netns_lab: NetnsLab, tmp_path: Path
) -> None:
    # An IPv6 address no namespace has: neither peer host routes it.
    unrouted = tmp_path / "lab.yaml"
    unrouted.write_text(
        netns_lab.inventory_path.read_text()
        .replace(
            "address: 198.18.0.1/24", "address: 198.18.0.1/24\n        address6: fd00:99::1/64"
        )
        .replace(
            "address: 198.18.0.2/24", "address: 198.18.0.2/24\n        address6: fd00:99::2/64"
        )
    )
    done = hil("inventory", "check", "--peers", str(unrouted))
    assert done.returncode == 5
    assert "ok (" not in done.stdout
    assert done.stderr.splitlines()[0] == (
        f"{unrouted}: ns0-ns1: peer host ns1 -> DUT ns0:p0 fd00:99::1: no route: "
        "ip route get fd00:99::1 said: RTNETLINK answers: Network is unreachable"
    )
    assert len(done.stderr.splitlines()) == 2
    assert "Traceback" not in done.stderr
