"""Capturing a link at every point of its plan: real sshd, real tcpdump, the real agent's
clocks, in the netns lab.

The default plan captures both ends; a ``host`` plan names a host's netdev as
the tap; a ``command`` plan runs a real tcpdump through the inventory's
start/stop/fetch templates.  Each test checks that nothing is left running.
"""

from __future__ import annotations

import dataclasses
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from netnslab import NetnsLab
from test_capture import tcpdumps

from hil.cm.clock import controller_us
from hil.errors import InputError
from hil.host.hosts import Hosts
from hil.inventory.model import CaptureSpec, Host, Inventory, Pair, SshConfig
from hil.judge.timeline import ClockOffset
from hil.ssh import SSHSession
from hil.wire import capture as capture_module
from hil.wire.linkcapture import LinkCapture
from hil.wire.plan import CapturePlan, TcpdumpPoint, capture_plan


@pytest.fixture
def inventory(netns_lab: NetnsLab) -> Inventory:
    # One more host, whose sshd is not there: port 1 of this machine refuses at once.
    gone = Host("gone", SshConfig(host="127.0.0.1", port=1, connect_timeout=2))
    inv = netns_lab.inventory()
    return dataclasses.replace(inv, hosts={**inv.hosts, "gone": gone})


def remote_files(link: LinkCapture) -> list[str]:
    """Glob patterns of the files the running captures of ``link`` keep on their hosts
    (in /tmp, which the namespace hosts share with this machine)."""
    return [
        cap.remote if isinstance(cap, capture_module.Capture) else f"/tmp/{cap.id}*"
        for cap in link.running.values()
    ]


def left(patterns: list[str]) -> list[str]:
    """The files matching ``patterns`` that still exist."""
    return [str(p) for pattern in patterns for p in Path("/tmp").glob(Path(pattern).name)]


@pytest.fixture
def hosts(inventory: Inventory, netns_lab: NetnsLab) -> Iterator[Hosts]:
    with Hosts(inventory) as hosts:
        yield hosts
    assert tcpdumps(netns_lab) == []  # whatever happened, nothing is left capturing


@pytest.fixture
def pair(inventory: Inventory) -> Pair:
    return inventory.pairs()[0]


def _ping(lab: NetnsLab, count: int = 3) -> None:
    peer = lab.hosts[1].port("p0").address.ip
    lab.exec(0, ["ping", "-c", str(count), "-i", "0.2", "-W", "2", str(peer)])


def _echo_times(pcap: Path, writing: bool = False) -> list[int]:
    """The wall-clock stamps (µs) of the ICMP echo packets in ``pcap``; ``writing``: a
    file tcpdump still writes, whose last record may be cut (tcpdump -r then fails)."""
    out = subprocess.run(
        ["tcpdump", "-n", "-tt", "-r", str(pcap), "icmp"],
        capture_output=True, text=True, timeout=30, check=not writing,
    ).stdout  # fmt: skip
    return [round(float(line.split()[0]) * 1e6) for line in out.splitlines() if "ICMP echo" in line]


def _until_written(link: LinkCapture, echoes: int = 6) -> None:
    """Wait (at most 20 s) until each stand-in tool's file holds ``echoes`` ICMP echoes.
    The stand-in's stop interrupts tcpdump, which then drops what its socket still
    holds: under CI's load a reply was lost so (2026-12-07)."""
    raws = [
        Path(f"/tmp/{cap.id}.raw.pcap")
        for cap in link.running.values()
        if not isinstance(cap, capture_module.Capture)
    ]
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if all(len(_echo_times(raw, writing=True)) >= echoes for raw in raws):
            return
        time.sleep(0.1)
    raise AssertionError(f"the tool's tcpdump wrote fewer than {echoes} echoes in 20 s")


def test_default_plan_captures_both_ends_and_places_them_on_the_timeline(
    netns_lab: NetnsLab, hosts: Hosts, pair: Pair, tmp_path: Path
) -> None:
    plan = capture_plan(pair, "siw")
    netdevs = [(p.host, p.netdev if isinstance(p, TcpdumpPoint) else None) for p in plan.points]
    assert netdevs == [("ns0", "data0"), ("ns1", "data0")]
    with LinkCapture.start(hosts, plan) as link:
        files = remote_files(link)
        first = controller_us()
        _ping(netns_lab)
        last = controller_us()
        captured = link.stop(tmp_path)
    assert left(files) == []
    assert captured.notes == ()
    assert captured.files == {"ns0": tmp_path / "ns0.pcap", "ns1": tmp_path / "ns1.pcap"}
    placement = captured.placement()
    assert placement.notes == ()
    for point, pcap in captured.files.items():
        stamps = _echo_times(pcap)
        assert len(stamps) == 6, f"{point}: 3 requests and 3 replies"
        # On the controller's monotonic clock, each packet lies between the readings taken
        # around the pings, give or take the stated uncertainty.
        shift, slack = placement.shift_us[point], placement.uncertainty_us[point]
        assert 0 < slack < 50_000
        for wall in stamps:
            assert first - slack <= wall + shift <= last + slack


def test_host_plan_captures_on_the_tap_host(
    netns_lab: NetnsLab, hosts: Hosts, pair: Pair, tmp_path: Path
) -> None:
    # ns1's own port stands in for a tap on the cable: a real netdev, captured promiscuously.
    tapped = dataclasses.replace(
        pair.link, capture=CaptureSpec(mode="host", host="ns1", netdev="data0")
    )
    plan = capture_plan(dataclasses.replace(pair, link=tapped), "iw_cxgb4")
    assert plan.points == (TcpdumpPoint("ns1", "ns1", "data0", promiscuous=True),)
    with LinkCapture.start(hosts, plan) as link:
        files = remote_files(link)
        _ping(netns_lab)
        known = ClockOffset("ns1", offset_us=123, uncertainty_us=4)  # the run's own
        captured = link.stop(tmp_path, [known])
    assert left(files) == []
    assert (captured.files, captured.notes) == ({"ns1": tmp_path / "ns1.pcap"}, ())
    assert len(_echo_times(captured.files["ns1"])) == 6
    assert captured.offsets == (known,)  # not measured again
    assert set(captured.placement().shift_us) == {"ns1"}


# A vendor tool stand-in: tcpdump started in the background by start, stopped by
# stop, its file handed over by fetch, each a real command run over SSH.
START = (
    "setsid tcpdump -i {netdev} -n -p -U --immediate-mode -Z root -w /tmp/{id}.raw.pcap "
    "</dev/null >/dev/null 2>&1 & echo $! >/tmp/{id}.pid; "
    "while [ ! -e /tmp/{id}.raw.pcap ]; do sleep 0.05; done"
)
STOP = (
    "pid=$(cat /tmp/{id}.pid) && kill -INT $pid && "
    "while kill -0 $pid 2>/dev/null; do sleep 0.05; done; rm -f /tmp/{id}.pid"
)
TOOL = CaptureSpec(
    mode="command",
    controller="ns0",
    start=("sh", "-c", START),
    stop=("sh", "-c", STOP),
    fetch=("mv", "/tmp/{id}.raw.pcap", "{pcap}"),
    vars=(("netdev", "data0"),),
)


def _command_plan(pair: Pair, spec: CaptureSpec) -> CapturePlan:
    return capture_plan(
        dataclasses.replace(pair, link=dataclasses.replace(pair.link, capture=spec)), "iw_cxgb4"
    )


def test_command_plan_runs_the_templates(
    netns_lab: NetnsLab, hosts: Hosts, pair: Pair, tmp_path: Path
) -> None:
    plan = _command_plan(pair, TOOL)
    with LinkCapture.start(hosts, plan) as link:
        files = remote_files(link)
        assert len(tcpdumps(netns_lab)) == 1  # start returned with the tool capturing
        _ping(netns_lab)
        _until_written(link)
        captured = link.stop(tmp_path)
    assert left(files) == []  # the tool's files, and {pcap}, are gone
    assert (captured.files, captured.notes) == ({"ns0": tmp_path / "ns0.pcap"}, ())
    assert len(_echo_times(captured.files["ns0"])) == 6


def test_a_failing_point_is_a_note_and_the_others_are_kept(
    netns_lab: NetnsLab, hosts: Hosts, pair: Pair, tmp_path: Path
) -> None:
    plan = CapturePlan(
        pair.name,
        "ends",
        (
            TcpdumpPoint("ns0", "ns0", "data0"),
            TcpdumpPoint("ns1", "ns1", "nosuch0"),  # tcpdump refuses
            TcpdumpPoint("gone", "gone", "data0"),  # no sshd
        ),
    )
    with LinkCapture.start(hosts, plan) as link:
        files = remote_files(link)
        _ping(netns_lab)
        captured = link.stop(tmp_path)
    assert left(files) == []
    assert captured.files == {"ns0": tmp_path / "ns0.pcap"}
    assert len(_echo_times(captured.files["ns0"])) == 6
    notes = "\n".join(captured.notes)
    assert "capture point ns1: not captured: ns1: tcpdump on nosuch0 exited" in notes
    assert "capture point gone: no clock sample before the capture: gone:" in notes
    assert "capture point gone: not captured: gone:" in notes
    assert set(captured.placement().shift_us) == {"ns0"}


def test_a_tool_that_cannot_fetch_loses_its_capture_only(
    netns_lab: NetnsLab, hosts: Hosts, pair: Pair, tmp_path: Path
) -> None:
    broken = dataclasses.replace(
        TOOL,
        fetch=("sh", "-c", "rm /tmp/{id}.raw.pcap; echo export failed >&2; exit 3", "{pcap}"),
    )
    plan = _command_plan(pair, broken)
    ends = capture_plan(pair, "siw")
    both = CapturePlan(pair.name, "ends", (*plan.points, ends.points[1]))
    with LinkCapture.start(hosts, both) as link:
        files = remote_files(link)
        _ping(netns_lab)
        captured = link.stop(tmp_path)
    assert left(files) == []
    assert captured.files == {"ns1": tmp_path / "ns1.pcap"}
    assert len(captured.notes) == 1
    assert captured.notes[0].startswith("capture point ns0: capture lost: ns0:")
    assert "export failed" in captured.notes[0]


def test_an_interrupt_while_starting_stops_what_runs(
    netns_lab: NetnsLab, hosts: Hosts, pair: Pair, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_start = capture_module.Capture.start
    started: list[capture_module.Capture] = []

    def start_or_interrupt(session: SSHSession, netdev: str, **kw: Any) -> capture_module.Capture:
        if session.name == "ns1":
            time.sleep(1.0)  # ns0's tcpdump (its own thread) is running by then
            raise KeyboardInterrupt
        started.append(real_start(session, netdev, **kw))
        return started[0]

    monkeypatch.setattr(capture_module.Capture, "start", start_or_interrupt)
    with pytest.raises(KeyboardInterrupt):
        LinkCapture.start(hosts, capture_plan(pair, "siw"))
    assert len(started) == 1  # one tcpdump ran, and the hosts fixture checks it is gone
    assert left([started[0].remote]) == []


def test_an_offloading_provider_without_a_capture_point_is_refused(
    hosts: Hosts, pair: Pair
) -> None:
    plan = capture_plan(pair, "iw_cxgb4")
    assert not plan.usable
    with pytest.raises(InputError, match="runs its TCP on the RNIC"):
        LinkCapture.start(hosts, plan)


def test_a_link_capture_is_cut_into_windows_and_goes_on(
    netns_lab: NetnsLab, hosts: Hosts, pair: Pair, tmp_path: Path
) -> None:
    plan = capture_plan(pair, "siw")
    with LinkCapture.start(hosts, plan) as link:
        files = remote_files(link)
        _ping(netns_lab, count=2)
        first = link.cut(tmp_path / "1")
        link.begin()
        assert link.missing == []  # every point still captures: nothing started again
        assert remote_files(link) == files
        _ping(netns_lab, count=3)
        second = link.cut(tmp_path / "2")
    assert left(files) == []
    for captured, pings in ((first, 2), (second, 3)):
        assert captured.notes == ()
        assert set(captured.files) == {"ns0", "ns1"}
        for pcap in captured.files.values():
            assert len(_echo_times(pcap)) == 2 * pings  # requests and replies, this window's
    assert set(second.placement().shift_us) == {"ns0", "ns1"}


def test_a_vendor_tool_is_stopped_at_a_cut_and_started_again_by_the_next_window(
    netns_lab: NetnsLab, hosts: Hosts, pair: Pair, tmp_path: Path
) -> None:
    with LinkCapture.start(hosts, _command_plan(pair, TOOL)) as link:
        _ping(netns_lab, count=1)
        first = link.cut(tmp_path / "1")
        assert tcpdumps(netns_lab) == []  # the tool cannot be cut while it runs
        link.begin()
        assert link.missing == [] and len(tcpdumps(netns_lab)) == 1
        _ping(netns_lab, count=2)
        second = link.cut(tmp_path / "2")
        files = remote_files(link)
    assert left(files) == []
    assert len(_echo_times(first.files["ns0"])) == 2
    assert len(_echo_times(second.files["ns0"])) == 4
