"""tcpdump captures through real sshd and tcpdump in the netns lab."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from netnslab import NetnsLab

from hil.errors import SSHError
from hil.ssh import SSHPool, SSHSession
from hil.wire.capture import _WRAPPER, Capture

PCAP_MAGIC = (b"\xd4\xc3\xb2\xa1", b"\xa1\xb2\xc3\xd4")


@pytest.fixture
def ns0(netns_lab: NetnsLab) -> Iterator[SSHSession]:
    with SSHPool(netns_lab.inventory(), ssh_config=None) as pool:
        yield pool.get("ns0")


def test_capture_fetches_the_packets_of_the_data_link(
    netns_lab: NetnsLab, ns0: SSHSession, tmp_path: Path
) -> None:
    port = netns_lab.hosts[0].ports[0]
    peer = netns_lab.hosts[1].port(port.peer_port).address.ip
    cap = Capture.start(ns0, port.netdev)
    netns_lab.exec(0, ["ping", "-c", "3", "-i", "0.2", "-W", "2", str(peer)])
    fetched = cap.stop(tmp_path / "ns0.pcap")
    assert fetched.notes == ()
    local = fetched.path
    data = local.read_bytes()
    assert data[:4] in PCAP_MAGIC
    # tcpdump -r reads it back: the pings are in the file.
    text = subprocess.run(
        ["tcpdump", "-n", "-r", str(local)], capture_output=True, text=True, timeout=30, check=True
    ).stdout
    assert text.count("ICMP echo request") >= 3
    # The namespace hosts share this machine's /tmp, where captures are written (other
    # xdist workers' too: only this one's file is looked for).
    assert not Path(cap.remote).exists()  # the remote file is gone


def test_capture_on_a_missing_netdev_names_host_and_netdev(ns0: SSHSession) -> None:
    with pytest.raises(SSHError, match=r"ns0: tcpdump on nosuch0 exited"):
        Capture.start(ns0, "nosuch0")


def tcpdumps(lab: NetnsLab) -> list[str]:
    """The tcpdump processes running in the lab's namespaces (their command lines)."""
    found = []
    for host in lab.hosts:
        pids = subprocess.run(
            ["ip", "netns", "pids", host.netns], capture_output=True, text=True, timeout=10
        ).stdout.split()
        for pid in pids:
            try:
                argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue  # it ended meanwhile
            if Path(argv[0].decode()).name == "tcpdump":
                found.append(" ".join(a.decode() for a in argv))
    return found


def test_capture_keeps_the_first_packets_and_notes_its_bound(
    netns_lab: NetnsLab, ns0: SSHSession, tmp_path: Path
) -> None:
    port = netns_lab.hosts[0].ports[0]
    peer = netns_lab.hosts[1].port(port.peer_port).address.ip
    cap = Capture.start(ns0, port.netdev, count=4)
    netns_lab.exec(0, ["ping", "-c", "5", "-i", "0.2", "-W", "2", str(peer)])
    fetched = cap.stop(tmp_path / "ns0.pcap")
    assert fetched.notes == (
        f"ns0 {port.netdev}: the capture stopped at its bound of 4 packets; "
        "what came later is not in it",
    )
    text = subprocess.run(
        ["tcpdump", "-n", "-r", str(fetched.path)],
        capture_output=True, text=True, timeout=30, check=True,
    ).stdout  # fmt: skip
    # The first packets (perhaps ARP or IPv6 noise first), never the last ones.
    lines = text.splitlines()
    assert len(lines) == 4
    icmp = [line for line in lines if "ICMP echo" in line]
    assert icmp and "ICMP echo request" in icmp[0] and ", seq 1," in icmp[0]
    assert not any(", seq 5," in line for line in lines)
    assert tcpdumps(netns_lab) == []


def test_a_lost_connection_stops_the_capture_and_removes_its_file(
    netns_lab: NetnsLab, ns0: SSHSession
) -> None:
    cap = Capture.start(ns0, netns_lab.hosts[0].ports[0].netdev)
    assert tcpdumps(netns_lab) and Path(cap.remote).exists()
    ns0.transport.close()  # as a crashed controller or a cut network would
    deadline = time.monotonic() + 10
    while (tcpdumps(netns_lab) or Path(cap.remote).exists()) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert tcpdumps(netns_lab) == []
    assert not Path(cap.remote).exists()


def test_the_stop_waits_until_the_file_stops_growing_before_it_ends_tcpdump(
    tmp_path: Path,
) -> None:
    # The wrapper itself, run by the local sh, with a writer in tcpdump's place that is
    # still appending when the stop line comes: every write must land before the TERM.
    out, trace = tmp_path / "cap", tmp_path / "trace"
    writer = (
        f"trap 'echo term >> {trace}; exit 0' TERM; "
        f"i=0; while [ $i -lt 6 ]; do printf x >> {out}; i=$((i+1)); sleep 0.1; done; "
        f"echo done >> {trace}; while :; do sleep 0.05; done"
    )
    with subprocess.Popen(
        ["sh", "-c", _WRAPPER, "hil-capture", str(out), "sh", "-c", writer],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as proc:
        assert proc.stdin is not None and proc.stdout is not None
        # The writer has begun, and has writes to go (after a fixed 0.15 s a loaded machine
        # had not always started it: the wrapper then found no file and ended it at once).
        deadline = time.monotonic() + 10
        while not (out.exists() and out.stat().st_size) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert out.exists(), "the writer did not begin within 10 s"
        proc.stdin.write("stop\n")
        proc.stdin.flush()
        status = proc.stdout.readline()
        proc.stdin.close()
        proc.wait(timeout=10)
    assert status.strip() == "0"
    assert trace.read_text().split() == ["done", "term"]
    assert not out.exists()  # the second line (EOF) removed the file


def _ended(cap: Capture) -> bool:
    """tcpdump ended by itself and all it said has come: the wrapper's status line (the
    capture no longer reusable) and tcpdump's statistics on stderr."""
    return not cap.reusable and "captured" in cap._stderr()


def _read(pcap: Path) -> list[str]:
    """tcpdump's line per packet of ``pcap``."""
    return subprocess.run(
        ["tcpdump", "-n", "-r", str(pcap)],
        capture_output=True, text=True, timeout=30, check=True,
    ).stdout.splitlines()  # fmt: skip


def _icmp(pcap: Path) -> list[str]:
    return [line for line in _read(pcap) if "ICMP echo request" in line]


def _ping(lab: NetnsLab, count: int) -> str:
    """``count`` pings from ns0 to its peer; the netdev they leave by."""
    port = lab.hosts[0].ports[0]
    peer = lab.hosts[1].port(port.peer_port).address.ip
    lab.exec(0, ["ping", "-c", str(count), "-i", "0.2", str(peer)])
    return port.netdev


def test_a_cut_capture_goes_on_and_each_window_holds_only_its_own_packets(
    netns_lab: NetnsLab, ns0: SSHSession, tmp_path: Path
) -> None:
    cap = Capture.start(ns0, netns_lab.hosts[0].ports[0].netdev)
    try:
        _ping(netns_lab, 2)
        first = cap.cut(tmp_path / "1.pcap", count=1000)
        assert cap.reusable and tcpdumps(netns_lab)  # tcpdump goes on
        _ping(netns_lab, 3)
        second = cap.cut(tmp_path / "2.pcap", count=1000)
        third = cap.cut(tmp_path / "3.pcap", count=1000)
    finally:
        cap.discard()
    assert (first.notes, second.notes) == ((), ())
    assert len(_icmp(first.path)) == 2 and len(_icmp(second.path)) == 3
    assert _icmp(third.path) == []  # nothing sent since: a header and no packet
    assert third.path.read_bytes()[:4] in PCAP_MAGIC
    assert tcpdumps(netns_lab) == [] and not Path(cap.remote).exists()


def test_a_window_keeps_its_first_packets_and_says_how_many_it_left_out(
    netns_lab: NetnsLab, ns0: SSHSession, tmp_path: Path
) -> None:
    cap = Capture.start(ns0, netns_lab.hosts[0].ports[0].netdev)
    try:
        netdev = _ping(netns_lab, 4)
        window = cap.cut(tmp_path / "w.pcap", count=3)
    finally:
        cap.discard()
    (note,) = window.notes
    assert note.startswith(f"ns0 {netdev}: the test sent ") and "the first 3 are kept" in note
    assert len(_read(window.path)) == 3


def test_a_capture_that_hit_its_bound_is_not_reusable_and_says_why(
    netns_lab: NetnsLab, ns0: SSHSession, tmp_path: Path
) -> None:
    cap = Capture.start(ns0, netns_lab.hosts[0].ports[0].netdev, count=2)
    try:
        netdev = _ping(netns_lab, 3)
        # tcpdump has ended at its bound and said so: its status line and its statistics
        # (sshd may send them apart, and on a loaded machine past a fixed 0.3 s).
        deadline = time.monotonic() + 10
        while not _ended(cap) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _ended(cap), "tcpdump did not end at its bound within 10 s"
        window = cap.cut(tmp_path / "w.pcap", count=100)
        assert not cap.reusable
    finally:
        cap.discard()
    assert window.notes == (
        f"ns0 {netdev}: the capture stopped at its bound of 2 packets; "
        "what came later is not in it",
    )
