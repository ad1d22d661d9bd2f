"""The agent pushed over SFTP and run over SSH on a netns-lab host (real sshd)."""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from agenttest import close_during_run, pids_with_cmdline, process_running, wait_for
from netnslab import NetnsLab

from hil.agent import Agent, build
from hil.inventory.model import Host
from hil.ssh import SSHPool, SSHSession

# lab_host: an SSH session to the netns lab's first host, that host, the lab.
LabHost = tuple[SSHSession, Host, NetnsLab]


@pytest.fixture(scope="module")
def lab_host(netns_lab: NetnsLab) -> Iterator[LabHost]:
    """The first host of the session's netns lab and an SSH session to it."""
    inventory = netns_lab.inventory()
    name = netns_lab.hosts[0].name
    with SSHPool(inventory, ssh_config=None) as pool:
        yield pool.get(name), inventory.hosts[name], netns_lab


@pytest.fixture
def remote_dir() -> Iterator[str]:
    """A fresh upload directory (absolute), removed afterwards."""
    path = Path(tempfile.mkdtemp(prefix="hil-agent-cache-")) / "agent"
    yield str(path)
    shutil.rmtree(path.parent)


def test_push_handshake_and_cache_hit_on_the_second_push(
    lab_host: LabHost, remote_dir: str
) -> None:
    session, host, _ = lab_host
    bundle = build()
    uploaded = Path(remote_dir) / f"{bundle.sha256}.pyz"
    assert not uploaded.exists()
    with Agent.start(session, host, remote_dir=remote_dir) as agent:
        assert agent.hello.hash == bundle.sha256
        assert agent.host == host.name
    assert hashlib.sha256(uploaded.read_bytes()).hexdigest() == bundle.sha256
    first = uploaded.stat()
    with Agent.start(session, host, remote_dir=remote_dir) as agent:
        assert agent.ping() == agent.hello.pid
    second = uploaded.stat()
    assert (second.st_ino, second.st_mtime_ns) == (first.st_ino, first.st_mtime_ns)
    # The archive and the copy it unpacked itself into; no temp files left.
    assert sorted(os.listdir(remote_dir)) == [bundle.sha256, uploaded.name]


def test_a_second_agent_of_a_build_runs_on_the_bytecode_the_first_cached(
    lab_host: LabHost, remote_dir: str
) -> None:
    session, host, _ = lab_host
    bundle = build()
    with Agent.start(session, host, remote_dir=remote_dir) as agent:
        agent.links()
    unpacked = Path(remote_dir) / bundle.sha256
    cached = {
        p: p.stat().st_mtime_ns
        for p in unpacked.rglob("*.pyc")
        if p.parent.parent.name in ("remote", "iproute")  # hil_agent/remote, pyroute2/iproute
    }
    names = {p.name.split(".")[0] for p in cached}
    assert {"main", "netlink", "linux"} <= names, names  # the agent's and pyroute2's
    with Agent.start(session, host, remote_dir=remote_dir) as agent:
        agent.links()
    # Read, not written again: the second agent compiled nothing of these.
    assert {p: p.stat().st_mtime_ns for p in cached} == cached


def test_set_and_restore_an_address_in_the_host_namespace(
    lab_host: LabHost, remote_dir: str
) -> None:
    session, host, lab = lab_host
    rnic = host.rnics[0]
    extra = "198.18.200.1/24"

    def ip(*args: str) -> str:  # what the namespace itself says, not the agent
        return lab.exec(0, ["ip", "-o", *args, "dev", rnic.netdev]).stdout

    with Agent.start(session, host, remote_dir=remote_dir) as agent:
        before = agent.set_link(rnic.netdev, mtu=1400)
        agent.add_address(rnic.netdev, extra)
        try:
            assert extra in ip("addr", "show") and " mtu 1400 " in ip("link", "show")
        finally:
            agent.delete_address(rnic.netdev, extra)
            agent.set_link(rnic.netdev, mtu=before.mtu)
    assert extra not in ip("addr", "show") and f" mtu {before.mtu} " in ip("link", "show")
    assert str(rnic.address) in ip("addr", "show")


def test_closing_the_channel_ends_the_remote_agent_and_its_children(
    lab_host: LabHost, remote_dir: str
) -> None:
    session, host, _ = lab_host
    argv = ["sleep", f"{700 + uuid.uuid4().int % 99}.75"]
    agent = Agent.start(session, host, remote_dir=remote_dir)
    errors = close_during_run(agent, argv)
    assert wait_for(lambda: not process_running(agent.hello.pid))
    assert wait_for(lambda: pids_with_cmdline(argv) == [])
    assert len(errors) == 1 and "agent exited" in str(errors[0])
