"""SSHPool on the netns lab: one connection per host, jump hosts, ssh_config aliases."""

from __future__ import annotations

import dataclasses
import socket
from pathlib import Path

import pytest
from netnslab import ALT_SSH_PORT, NetnsLab
from sshtest import inventory_of, with_ssh

from hil.errors import HostKeyError, InputError, Unreachable
from hil.inventory.model import Host, Inventory
from hil.ssh import SSHPool, SSHSession


def sshd_clients(lab: NetnsLab, index: int, peer: str) -> set[int]:
    """Ports of ``peer`` with an established connection to sshd (port 22) of host ``index``."""
    out = lab.exec(index, ["ss", "-Htn", "state", "established", "( sport = :22 )"]).stdout
    remotes = (line.split()[-1].rpartition(":") for line in out.splitlines())
    return {int(port) for address, _, port in remotes if address == peer}


def b_via_a(inventory: Inventory) -> Host:
    """ns1 at its data address, which only ns0 can reach, through ns0."""
    ns1 = inventory.hosts["ns1"]
    data = str(ns1.rnic("p0").address.ip)  # type: ignore[union-attr]
    return dataclasses.replace(with_ssh(ns1, host=data, jump="ns0"), name="ns1-via-ns0")


def test_one_connection_per_host_is_reused(pool: SSHPool, netns_lab: NetnsLab) -> None:
    root_side = str(next(netns_lab.hosts[0].mgmt_address.network.hosts()))
    before = sshd_clients(netns_lab, 0, root_side)
    session = pool.get("ns0")
    for _ in range(5):
        assert pool.get("ns0") is session
        session.run(["true"])
    with session.open_process(["cat"]):
        session.sftp()
        sock = session.transport.sock  # a socket or a proxy channel, to paramiko's types
        assert isinstance(sock, socket.socket)
        ours = sock.getsockname()[1]
        assert sshd_clients(netns_lab, 0, root_side) - before == {ours}
    assert pool.get("ns1") is not session


def test_close_all_closes_every_session(lab_inventory: Inventory) -> None:
    pool = SSHPool(lab_inventory, ssh_config=None)
    sessions = [pool.get("ns0"), pool.get("ns1")]
    pool.close_all()
    assert not any(s.is_alive() for s in sessions)
    assert pool.get("ns0").is_alive()  # a closed pool can connect again
    pool.close_all()


def test_a_dead_session_is_replaced(pool: SSHPool) -> None:
    first = pool.get("ns0")
    first.transport.close()
    second = pool.get("ns0")
    assert second is not first and second.run(["true"]).status == 0


def test_an_unknown_host_name_lists_the_known_ones(pool: SSHPool) -> None:
    with pytest.raises(InputError, match=r"no host 'nope' \(hosts: ns0, ns1\)"):
        pool.get("nope")


def test_jump_host_from_the_inventory(lab_inventory: Inventory, netns_lab: NetnsLab) -> None:
    # Never connect to the data address from here: outside the namespaces it
    # is routed out of the machine.
    target = b_via_a(lab_inventory)
    inventory = inventory_of(lab_inventory, lab_inventory.hosts["ns0"], target)
    with SSHPool(inventory, ssh_config=None) as pool:
        session = pool.get("ns1-via-ns0")
        assert "198.18.0.2/24" in session.run(["ip", "-br", "addr", "show", "data0"]).stdout
        # sshd of ns1 sees the connection coming from ns0's data address.
        assert sshd_clients(netns_lab, 1, "198.18.0.1")
        assert pool.get("ns0").is_alive()  # the jump host's session is pooled too
        with session.open_process(["cat"]) as proc:
            proc.write(b"through the jump\n")
            assert proc.readline(timeout=10) == b"through the jump\n"


def test_unknown_key_behind_a_jump_host_says_where_to_scan(
    lab_inventory: Inventory, tmp_path: Path
) -> None:
    target = with_ssh(b_via_a(lab_inventory), known_hosts=str(tmp_path / "empty"))
    with SSHPool(
        inventory_of(lab_inventory, lab_inventory.hosts["ns0"], target), ssh_config=None
    ) as pool:
        with pytest.raises(
            HostKeyError,
            match=(r"run ssh-keyscan -p 22 198.18.0.2 on ns0 and add its output to .*/empty"),
        ):
            pool.get("ns1-via-ns0")


def test_jump_session_passed_by_hand(lab_inventory: Inventory) -> None:
    with SSHSession.connect(lab_inventory.hosts["ns0"], ssh_config=None) as jump:
        target = with_ssh(b_via_a(lab_inventory), jump=None)
        with SSHSession.connect(target, jump_session=jump, ssh_config=None) as session:
            assert session.run(["echo", "ok"]).stdout == "ok\n"


def test_a_closed_port_behind_the_jump_host_is_unreachable(lab_inventory: Inventory) -> None:
    target = with_ssh(b_via_a(lab_inventory), port=2)
    with SSHPool(
        inventory_of(lab_inventory, lab_inventory.hosts["ns0"], target), ssh_config=None
    ) as pool:
        with pytest.raises(Unreachable, match=r"198.18.0.2:2: the jump host ns0 could not"):
            pool.get("ns1-via-ns0")


def test_a_jump_loop_is_refused(lab_inventory: Inventory) -> None:
    a = with_ssh(lab_inventory.hosts["ns0"], jump="ns1")
    b = with_ssh(lab_inventory.hosts["ns1"], jump="ns0")
    with SSHPool(inventory_of(lab_inventory, a, b), ssh_config=None) as pool:
        with pytest.raises(InputError, match="jump hosts form a loop: ns0 -> ns1 -> ns0"):
            pool.get("ns0")


def write_config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "ssh_config"
    path.write_text(text)
    return path


def test_an_ssh_config_alias_gives_address_user_and_key(
    lab_inventory: Inventory, netns_lab: NetnsLab, tmp_path: Path
) -> None:
    ns0 = lab_inventory.hosts["ns0"]
    config = write_config(
        tmp_path,
        (
            f"Host lab-zero\n  HostName {ns0.ssh.host}\n  User root\n"
            f"  IdentityFile {netns_lab.client_key}\n"
        ),
    )
    aliased = with_ssh(ns0, host="lab-zero", identity_file=None)
    with SSHPool(inventory_of(lab_inventory, aliased), ssh_config=config) as pool:
        session = pool.get("ns0")
        assert session.endpoint.address == ns0.ssh.host
        assert session.endpoint.identity_files == (netns_lab.client_key,)
        assert "198.18.0.1/24" in session.run(["ip", "-br", "addr", "show", "data0"]).stdout


def test_inventory_values_win_over_ssh_config(lab_inventory: Inventory, tmp_path: Path) -> None:
    ns0 = lab_inventory.hosts["ns0"]
    config = write_config(
        tmp_path,
        (f"Host lab-zero\n  HostName {ns0.ssh.host}\n  Port 1\n  IdentityFile /nonexistent\n"),
    )
    known = tmp_path / "known_hosts"
    aliased = with_ssh(
        ns0,
        host="lab-zero",
        port=ALT_SSH_PORT,
        known_hosts=str(known),
        host_key_policy="accept-new",
    )
    with SSHPool(inventory_of(lab_inventory, aliased), ssh_config=config) as pool:
        assert pool.get("ns0").endpoint.port == ALT_SSH_PORT
    assert known.read_text().startswith(f"[{ns0.ssh.host}]:{ALT_SSH_PORT} ")


def test_proxyjump_from_ssh_config(lab_inventory: Inventory, tmp_path: Path) -> None:
    ns0 = lab_inventory.hosts["ns0"]
    config = write_config(
        tmp_path, f"Host lab-one\n  HostName 198.18.0.2\n  ProxyJump root@{ns0.ssh.host}:22\n"
    )
    target = dataclasses.replace(with_ssh(ns0, host="lab-one"), name="ns1")
    with SSHPool(inventory_of(lab_inventory, target), ssh_config=config) as pool:
        session = pool.get("ns1")
        assert session.endpoint.jumps == (f"root@{ns0.ssh.host}:22",)
        assert "198.18.0.2/24" in session.run(["ip", "-br", "addr", "show", "data0"]).stdout
