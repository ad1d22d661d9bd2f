"""Packet capture through real sshd and tcpdump in the netns lab."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from netnslab import NetnsLab

from hil.errors import SSHError
from hil.report.pcap import Capture
from hil.ssh import SSHPool, SSHSession

PCAP_MAGIC = (b"\xd4\xc3\xb2\xa1", b"\xa1\xb2\xc3\xd4")


@pytest.fixture
def ns0(netns_lab: NetnsLab) -> Iterator[SSHSession]:
    with SSHPool(netns_lab.inventory(), ssh_config=None) as pool:
        yield pool.get("ns0")


def _remote_pcaps() -> list[str]:
    # The namespace hosts share this machine's /tmp, where captures are written.
    return sorted(p.name for p in Path("/tmp").glob("hil-*.pcap"))


def test_capture_fetches_the_packets_of_the_data_link(
    netns_lab: NetnsLab, ns0: SSHSession, tmp_path: Path
) -> None:
    port = netns_lab.hosts[0].ports[0]
    peer = netns_lab.hosts[1].port(port.peer_port).address.ip
    before = _remote_pcaps()
    cap = Capture.start(ns0, port.netdev)
    netns_lab.exec(0, ["ping", "-c", "3", "-i", "0.2", "-W", "2", str(peer)])
    local = cap.stop(tmp_path / "ns0.pcap")
    data = local.read_bytes()
    assert data[:4] in PCAP_MAGIC
    # tcpdump -r reads it back: the pings are in the file.
    text = subprocess.run(
        ["tcpdump", "-n", "-r", str(local)], capture_output=True, text=True, timeout=30, check=True
    ).stdout
    assert text.count("ICMP echo request") >= 3
    assert _remote_pcaps() == before  # the remote file is gone


def test_capture_on_a_missing_netdev_names_host_and_netdev(ns0: SSHSession) -> None:
    with pytest.raises(SSHError, match=r"ns0: tcpdump on nosuch0 exited"):
        Capture.start(ns0, "nosuch0")
