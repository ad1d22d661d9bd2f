"""Hardware evidence (hil.host.hwevidence): ethtool -S and iw_cxgb4's debugfs, before and after.

On the recorded T6 pair (tests/fake_hosts.py, tests/data/t6: files written
from the driver's own printing functions), whose files and recorded
``ethtool -S`` a test changes between before and after; the split of one
``cat`` into the four files also runs through the real agent and the real
``cat`` of this machine.  The real ``ethtool -S`` of a virtio_net port runs
in the virtual lab (tests/plugin/test_plugin_fixtures_lab.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from fake_hosts import E810_NETDEV, T6_DATA, T6_NETDEV, RecordedAgent, e810_hosts, t6_hosts
from test_evidence import FakeProbe

from hil.agent import Agent
from hil.agent.types import CommandResult
from hil.host import evidence, hwdebugfs, hwevidence
from hil.judge.profiles import SIW

PCI = "0000:81:00.4"
DIR = f"/sys/kernel/debug/iw_cxgb4/{PCI}"
NEW_QP = (
    "rc qp sq id 1028 rq id 1029 state 1 onchip 0 ep tid 8215 state 7 "
    "198.18.1.1:37326/37326->198.18.1.2:20560/20560\n"
)
NEW_EP = (
    "ep 00000000c0ffee00 cm_id 00000000c0ffee01 qp 00000000c0ffee02 state 7 flags 0x0 "
    "history 0xa080009 hwtid 8215 atid 5 conn_na 0 abort_na 0 "
    "198.18.1.1:37326/37326 <-> 198.18.1.2:20560/20560\n"
)


@pytest.fixture
def t6a(tmp_path: Path) -> RecordedAgent:
    return t6_hosts(tmp_path).recorded("t6a")


def _target(agent: RecordedAgent) -> hwevidence.Target:
    return hwevidence.locate(agent, agent.host, T6_NETDEV, "cxgb4_0", "iw_cxgb4")


def _add_line(agent: RecordedAgent, name: str, line: str) -> None:
    """A new object in debugfs file ``name`` (before qp_open's closing NUL byte)."""
    text = agent.file(f"{DIR}/{name}").read_text()
    body, nul, _ = text.partition("\0")
    agent.write(f"{DIR}/{name}", body + line + nul)


def _bump(agent: RecordedAgent, netdev: str = T6_NETDEV, **deltas: int) -> None:
    """Record an ``ethtool -S netdev`` whose counters ``deltas`` grew by that much."""
    lines = []
    for line in agent.run(["ethtool", "-S", netdev]).stdout.splitlines():
        name, sep, value = line.rpartition(":")
        if sep and name.strip() in deltas:
            line = f"{name}: {int(value) + deltas[name.strip()]}"
        lines.append(line)
    agent.record(f"ethtool -S {netdev}", "\n".join(lines) + "\n")


def test_the_debugfs_directory_is_the_rdma_devices_pci_function(t6a: RecordedAgent) -> None:
    # device.c c4iw_alloc: debugfs_create_dir(pci_name(lldi.pdev)); the IB device's parent.
    assert _target(t6a) == hwevidence.Target("t6a", T6_NETDEV, DIR)


def test_ethtool_s_of_the_t6_is_parsed_with_cxgb4s_padded_names(t6a: RecordedAgent) -> None:
    counters, absent = hwevidence.read_counters(t6a, _target(t6a))
    assert absent == ""
    assert counters["tx_frames_ok"] == 4286416  # "tx_frames_ok           : 4286416"
    assert counters["db_drop"] == 0 and "rx_bg0_frames_dropped" in counters
    assert counters["-------Loopback-----------"] == 0  # its value is the port id
    assert "NIC statistics" not in counters


def test_ethtool_s_of_the_e810_is_read_through_the_same_path(tmp_path: Path) -> None:
    e810a = e810_hosts(tmp_path).recorded("e810a")
    target = hwevidence.locate(e810a, "e810a", E810_NETDEV, "irdma0", "irdma")
    assert target.debugfs is None and "irdma has no debugfs files" in target.absent
    counters, absent = hwevidence.read_counters(e810a, target)
    # ice_ethtool.c (6.12) ICE_ALL_STATS_LEN, in __ice_get_strings order: 16 VSI
    # stats, packets and bytes of 8 Tx then 8 Rx queues, 47 PF stats, 8 priorities' xon/xoff
    assert absent == "" and len(counters) == 16 + 8 * 2 * 2 + 47 + 8 * 2 * 2
    assert list(counters)[:2] == ["rx_unicast", "tx_unicast"]
    assert list(counters)[-1] == "rx_priority_7_xoff.nic"
    errors = ("tx_errors", "rx_dropped", "tx_errors.nic", "tx_timeout.nic", "rx_crc_errors.nic")
    assert [counters[name] for name in errors] == [0] * len(errors)


def test_an_e810_crc_error_shows_among_the_changed_counters(tmp_path: Path) -> None:
    e810b = e810_hosts(tmp_path).recorded("e810b")
    target = hwevidence.locate(e810b, "e810b", E810_NETDEV, "irdma0", "irdma")
    before = hwevidence.snapshot(e810b, target)
    _bump(e810b, E810_NETDEV, **{"rx_crc_errors.nic": 3, "rx_size_big.nic": 1000})
    hw = hwevidence.HwEvidence({"e810b": before}, {"e810b": hwevidence.snapshot(e810b, target)})
    changed = {c.name: c.delta for c in hw.changes("e810b")}
    assert changed == {"rx_crc_errors.nic": 3, "rx_size_big.nic": 1000}
    assert "debugfs: absent: irdma has no debugfs files" in hw.to_text()


def test_one_cat_is_split_back_into_the_four_files(t6a: RecordedAgent) -> None:
    found, absent = hwevidence.read_debugfs(t6a, _target(t6a))
    assert absent == "" and found is not None
    assert (found.qps, found.eps, found.listeners) == (2, 2, 0)
    assert len(found.lines("stags")) == 4
    assert found.lines("stats")[0].split() == ["Object:", "Total", "Current", "Max", "Fail"]
    assert "AVAILABLE IRD:      32704" in found.files["stats"]
    assert "\0" not in "".join(found.files.values())
    runs = [c for c in t6a.calls if c[0] == "run"]
    assert [c[1]["argv"][0] for c in runs] == ["readlink", "cat"]  # one cat for all four


def test_t6bs_listener_is_counted_among_the_endpoints(tmp_path: Path) -> None:
    t6b = t6_hosts(tmp_path).recorded("t6b")
    found, _ = hwevidence.read_debugfs(t6b, _target(t6b))
    assert found is not None and (found.qps, found.eps, found.listeners) == (2, 3, 1)


def test_before_and_after_show_the_changed_counters_and_the_new_qp(t6a: RecordedAgent) -> None:
    target = _target(t6a)
    before = hwevidence.snapshot(t6a, target)
    _add_line(t6a, "qps", NEW_QP)
    _add_line(t6a, "eps", NEW_EP)
    _bump(t6a, tx_frames_ok=12, rx_frames_ok=10, tx_octets_ok=9000)
    after = hwevidence.snapshot(t6a, target)
    hw = hwevidence.HwEvidence({"t6a": before}, {"t6a": after})
    changed = {c.name: (c.before, c.after, c.delta) for c in hw.changes("t6a")}
    assert changed == {
        "tx_octets_ok": (6427915515, 6427924515, 9000),
        "tx_frames_ok": (4286416, 4286428, 12),
        "rx_frames_ok": (changed["rx_frames_ok"][0], changed["rx_frames_ok"][0] + 10, 10),
    }
    text = hw.to_text()
    assert f"ethtool -S {T6_NETDEV}: 3 of {len(after.counters)} counters changed" in text
    assert "tx_frames_ok" in text and "+12" in text
    assert f"debugfs {DIR}: QPs 2 -> 3, endpoints 2 -> 3" in text
    assert "-- qps after:\n" in text and "sq id 1028" in text
    assert "-- stats before and after (unchanged):\n" in text  # printed once
    data = hw.to_json()["t6a"]
    assert data["before"]["debugfs"]["directory"] == DIR
    assert {c["name"]: c["delta"] for c in data["changed"]}["tx_frames_ok"] == 12


def test_a_siw_host_has_no_debugfs_and_reads_none(t6a: RecordedAgent) -> None:
    target = hwevidence.locate(t6a, "t6a", T6_NETDEV, "siw0", "siw")
    assert target.debugfs is None and "siw has no debugfs files" in target.absent
    assert not t6a.calls  # nothing run to find that out
    snap = hwevidence.snapshot(t6a, target)
    assert snap.debugfs is None and snap.debugfs_absent == target.absent
    assert snap.counters and snap.counters_absent == ""


def test_debugfs_not_mounted_is_absent_with_how_to_mount(t6a: RecordedAgent) -> None:
    for name in hwdebugfs.FILES:
        t6a.file(f"{DIR}/{name}").unlink()
    found, absent = hwevidence.read_debugfs(t6a, _target(t6a))
    assert found is None
    assert f"{DIR} unreadable (No such file or directory)" in absent
    assert "mount -t debugfs none /sys/kernel/debug" in absent


def test_debugfs_as_non_root_is_absent_saying_so() -> None:
    # debugfs is mode 0700 and the files 0200: cat as a user answers EACCES.
    # (coreutils quotes the names: they hold colons.)
    errors = "".join(f"cat: '{DIR}/{n}': Permission denied\n" for n in hwdebugfs.FILES)
    found = hwdebugfs.split_debugfs(DIR, CommandResult(("cat",), 1, "", errors), hwdebugfs.FILES)
    assert found.files == {} and set(found.unreadable) == set(hwdebugfs.FILES)

    class Denied:
        def run(
            self,
            argv: list[str],
            timeout: float = 60.0,
            input: str | None = None,
            check: bool = False,
        ) -> CommandResult:
            return CommandResult(tuple(argv), 1, "", errors)

    _, absent = hwevidence.read_debugfs(Denied(), hwevidence.Target("h", "eth1", DIR))
    assert "Permission denied" in absent and "run the agent as root" in absent


def test_a_netdev_without_counters_is_absent_not_an_error(t6a: RecordedAgent) -> None:
    t6a.forget(f"ethtool -S {T6_NETDEV}")
    snap = hwevidence.snapshot(t6a, _target(t6a))
    assert snap.counters == {}
    assert snap.counters_absent.startswith(f"ethtool -S {T6_NETDEV} failed: not recorded")
    assert snap.debugfs is not None  # the other source is read all the same


def test_the_real_cat_of_the_t6_files_is_split_naming_the_missing_one(tmp_path: Path) -> None:
    # The real agent and the real cat: one file missing, three read.
    directory = tmp_path / "iw_cxgb4" / PCI
    directory.mkdir(parents=True)
    recorded = T6_DATA / "t6b" / "fs" / DIR.lstrip("/")
    for name in ("qps", "eps", "stats"):
        (directory / name).write_bytes((recorded / name).read_bytes())
    target = hwevidence.Target("here", "lo", str(directory))
    with Agent.local(name="here") as agent:
        found, absent = hwevidence.read_debugfs(agent, target)
    assert absent == "" and found is not None
    assert found.unreadable == {"stags": "No such file or directory"}
    assert (found.qps, found.eps, found.listeners) == (2, 3, 1)
    assert found.files["stats"] == (recorded / "stats").read_text()


# -- the leak check: debugfs QP and endpoint counts held to the settle rule ------------


def _leak_check(tmp_path: Path, plant: str, name: str) -> tuple[bool, str]:
    """Begin, plant a line in t6b's debugfs file ``name``, finish: (ok, text)."""
    hosts = t6_hosts(tmp_path)
    agents = {h: hosts.recorded(h) for h in ("t6a", "t6b")}
    probes = {h: FakeProbe([dict.fromkeys(evidence.KINDS, 0)]) for h in agents}
    extra = {h: hwevidence.counter(a, _target(a)) for h, a in agents.items()}
    base = evidence.begin(probes, extra)
    _add_line(agents["t6b"], name, plant)
    result = evidence.finish(probes, base, SIW, settle_s=0.3)
    return result.ok, result.to_text()


def test_a_qp_left_in_debugfs_is_a_leak_naming_host_and_file(tmp_path: Path) -> None:
    ok, text = _leak_check(tmp_path, NEW_QP, "qps")
    assert not ok
    assert f"t6b holds 3 QPs listed in {DIR}/qps after the test, 2 before: 1 leaked" in text
    assert f"t6a QPs listed in {DIR}/qps: 2 -> 2" in text  # both hosts compared


def test_an_endpoint_left_in_debugfs_is_a_leak(tmp_path: Path) -> None:
    ok, text = _leak_check(tmp_path, NEW_EP, "eps")
    assert not ok
    assert f"t6b holds 4 endpoints listed in {DIR}/eps after the test, 3 before" in text


def test_a_qp_the_driver_frees_within_the_settle_wait_is_no_leak(tmp_path: Path) -> None:
    t6a = t6_hosts(tmp_path).recorded("t6a")
    probes = {"t6a": FakeProbe([dict.fromkeys(evidence.KINDS, 0)])}
    base = evidence.begin(probes, {"t6a": hwevidence.counter(t6a, _target(t6a))})
    qps = t6a.file(f"{DIR}/qps").read_text()
    _add_line(t6a, "qps", NEW_QP)

    def sleep(_: float) -> None:  # the driver frees the QP while the check waits
        t6a.write(f"{DIR}/qps", qps)

    counts, _waited = evidence.settle(probes, base, settle_s=5.0, sleep=sleep)
    kind = hwevidence.count_kind(DIR, "qps")
    assert [(r.before, r.after) for r in counts if r.kind == kind] == [(2, 2)]


def test_debugfs_that_went_away_is_left_out_not_counted_as_zero(tmp_path: Path) -> None:
    t6a = t6_hosts(tmp_path).recorded("t6a")
    probes = {"t6a": FakeProbe([dict.fromkeys(evidence.KINDS, 0)])}
    base = evidence.begin(probes, {"t6a": hwevidence.counter(t6a, _target(t6a))})
    t6a.file(f"{DIR}/qps").unlink()
    counts, _ = evidence.settle(probes, base, settle_s=0)
    kinds = {r.kind for r in counts}
    assert hwevidence.count_kind(DIR, "qps") not in kinds
    assert hwevidence.count_kind(DIR, "eps") in kinds


def test_parse_skips_the_header_and_numbers_repeated_names() -> None:
    text = "NIC statistics:\n     rx_packets: 5\n     rx_packets: 7\n     odd: n/a\n"
    assert hwevidence.parse_ethtool_stats(text) == {"rx_packets": 5, "rx_packets#2": 7}
