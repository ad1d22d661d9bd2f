"""The netns lab itself: its topology, its inventory, and that it leaves nothing behind."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import tempfile
from pathlib import Path

import pytest

from hil.errors import LabError
from netnslab import NetnsLab, cleanup_stale
from netnslab import lab as netnslab_module


def namespaces() -> set[str]:
    out = subprocess.run(
        ["ip", "netns", "list"], capture_output=True, text=True, check=True, timeout=10
    ).stdout
    return {line.split()[0] for line in out.splitlines() if line.strip()}


def own_namespaces() -> set[str]:
    """The namespaces of this process's labs (``hil-<pid>-<n>``): other processes, such
    as the other xdist worker of ci/tests, make and delete theirs meanwhile."""
    return {n for n in namespaces() if n.startswith(f"hil-{os.getpid()}-")}


def running(pattern: str) -> bool:
    return subprocess.run(["pgrep", "-f", pattern], capture_output=True, timeout=10).returncode == 0


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_hosts_are_namespaces_with_sshd_and_a_data_cable(netns_lab: NetnsLab) -> None:
    a, b = netns_lab.hosts
    assert re.fullmatch(rf"hil-{os.getpid()}-\d+", a.netns) and a.netns in namespaces()
    for host in netns_lab.hosts:
        socket.create_connection((str(host.mgmt_address.ip), 22), timeout=5).close()
    assert (str(a.ports[0].address), str(b.ports[0].address)) == ("198.18.0.1/24", "198.18.0.2/24")
    netns_lab.exec(0, ["ping", "-c", "1", "-W", "5", "198.18.0.2"])
    listing = netns_lab.exec(1, ["ip", "-br", "addr", "show", "data0"]).stdout
    assert "198.18.0.2/24" in listing


def test_the_inventory_describes_the_lab(netns_lab: NetnsLab) -> None:
    inventory = netns_lab.inventory()
    pair = inventory.pair("ns0-ns1")
    assert [h.name for h in pair.hosts] == ["ns0", "ns1"]
    assert str(pair.rnic_b.address) == "198.18.0.2/24" and pair.rnic_b.netdev == "data0"
    assert (pair.rnic_a.driver, pair.rnic_a.fallback) == ("siw", "siw")
    assert [p.mode for p in pair.link.pulls] == ["admin", "blackhole"]
    ssh = pair.host_a.ssh
    assert (ssh.host, ssh.port, ssh.user) == (str(netns_lab.hosts[0].mgmt_address.ip), 22, "root")
    assert (ssh.identity_file, ssh.known_hosts) == (
        str(netns_lab.client_key),
        str(netns_lab.known_hosts),
    )
    assert (ssh.host_key_policy, pair.host_a.python) == ("strict", "/usr/bin/python3")


def test_three_hosts_form_a_chain() -> None:
    with NetnsLab(hosts=3) as lab:
        middle = lab.hosts[1]
        assert [(p.name, p.netdev, str(p.address)) for p in middle.ports] == [
            ("p0", "data0", "198.18.0.2/24"),
            ("p1", "data1", "198.18.1.1/24"),
        ]
        lab.exec(0, ["ping", "-c", "1", "-W", "5", "198.18.0.2"])
        lab.exec(2, ["ping", "-c", "1", "-W", "5", "198.18.1.1"])
        inventory = lab.inventory()
        assert list(inventory.links) == ["ns0-ns1", "ns1-ns2"]
        assert (inventory.pair("ns1-ns2").link.a.port, inventory.pair("ns1-ns2").link.b.port) == (
            "p1",
            "p0",
        )


def test_nothing_is_left_behind_even_when_the_body_fails() -> None:
    with pytest.raises(RuntimeError, match="test body failed"):
        with NetnsLab(hosts=2) as lab:
            names = {h.netns for h in lab.hosts}
            veths = [h.root_veth for h in lab.hosts]
            sshd = [lab.sshd_pid(i) for i in range(2)]
            # A process that would outlive its sshd if the lab did not kill it.
            lab.exec(0, ["sh", "-c", "setsid sleep 4271 >/dev/null 2>&1 < /dev/null &"])
            assert running("sleep 4271")
            raise RuntimeError("test body failed")
    assert not names & namespaces()
    assert not any(Path(f"/sys/class/net/{v}").exists() for v in veths)
    assert not any(alive(pid) for pid in sshd)
    assert not lab.tmpdir.exists()
    assert not running("sleep 4271")


def test_an_interrupt_while_building_leaves_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    before = own_namespaces()

    def interrupted(self: NetnsLab, host: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(NetnsLab, "_wait_sshd", interrupted)
    lab = NetnsLab(hosts=2)
    with pytest.raises(KeyboardInterrupt):
        with lab:
            pass
    assert own_namespaces() == before
    assert not lab.tmpdir.exists()


def test_an_sshd_that_cannot_start_is_reported_with_its_log(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    before = own_namespaces()
    monkeypatch.setattr(netnslab_module, "SSHD", "/nonexistent/sshd")
    with pytest.raises(LabError, match=r"sshd of ns0 \(hil-\d+-\d+\) did not start: .*nonexistent"):
        with NetnsLab(hosts=1):
            pass
    assert own_namespaces() == before


def test_cleanup_stale_removes_labs_of_dead_processes(netns_lab: NetnsLab) -> None:
    dead = subprocess.Popen(["true"])
    dead.wait()
    stale_ns = f"hil-{dead.pid}-0"
    subprocess.run(["ip", "netns", "add", stale_ns], check=True, timeout=10)
    stale_dir = Path(tempfile.mkdtemp(prefix=f"hil-netnslab-{dead.pid}-"))
    try:
        removed = cleanup_stale()
        assert stale_ns in removed and str(stale_dir) in removed
        assert stale_ns not in namespaces() and not stale_dir.exists()
        assert {h.netns for h in netns_lab.hosts} <= namespaces()  # ours is alive
    finally:
        subprocess.run(["ip", "netns", "del", stale_ns], capture_output=True, timeout=10)
        subprocess.run(["rm", "-rf", str(stale_dir)], timeout=10)
