"""Crashes during a test (hil/plugin/crash.py) in real pytest sessions on the netns lab.

A namespace host stands for a machine that stops answering: every process in
it (its sshd, the session's sshd children and the agent) is stopped with
SIGSTOP in the middle of a test, so its SSH and agent are really silent.
The netns lab's hosts have no power entry, so the host is quarantined and
the session stops; the virtual lab's guests, which have power, are recovered
(tests/plugin/test_crash_lab.py).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from netnslab import NetnsLab
from test_plugin_hosts import CHANGE_MTU, mtu
from test_plugin_timeouts import CONNECT_FIRST

from hil.reservation import open_store

pytest_plugins = ["pytester"]

# test_change (test_plugin_hosts) changes host A's MTU through the journal, then freezes
# host B (when FREEZE is set) and sleeps far past the liveness bound; a cleanup that the
# crash unwinds through raises an error of its own (as closing an SSH channel to a host
# whose QEMU is gone does); test_after is harmless.
FREEZE = """
import os, subprocess, time

def freeze():
    if os.environ.get("FREEZE") != "1":
        return
    pids = subprocess.run(["ip", "netns", "pids", os.environ["FROZEN_NETNS"]],
                          capture_output=True, text=True, check=True).stdout.split()
    subprocess.run(["kill", "-STOP", *pids], check=True)
    with open(os.environ["OUT"], "w") as f:
        f.write(str(time.monotonic()))
"""
AFTER = """
def test_after(hil_pair, hil_hosts):
    assert hil_hosts.agent(hil_pair.pair.host_b.name).ping()
"""


def crashy(mtu: int) -> str:
    after = "freeze()\n    try:\n        time.sleep(120)\n    finally:\n        raise EOFError()"
    return FREEZE + CHANGE_MTU.format(mtu=mtu, after=after) + AFTER


def netns_pids(netns: str) -> list[str]:
    out = subprocess.run(["ip", "netns", "pids", netns], capture_output=True, text=True)
    return out.stdout.split()


@pytest.fixture
def frozen_host(netns_lab: NetnsLab, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Host B's namespace, its processes continued (SIGCONT) whatever the test did."""
    netns = netns_lab.hosts[1].netns
    monkeypatch.setenv("FROZEN_NETNS", netns)
    try:
        yield netns
    finally:
        for pid in netns_pids(netns):
            os.kill(int(pid), signal.SIGCONT)


def session(pytester: pytest.Pytester, lab: NetnsLab, store: Path, *extra: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess(
        "-p",
        "no:cacheprovider",
        "--hil-inventory",
        str(lab.inventory_path),
        "--hil-store",
        str(store),
        "--hil-liveness",
        "6",
        "-rA",
        "--rootdir",
        str(pytester.path),  # node ids as the markers below name them
        *extra,
        timeout=300,
    )


def test_a_host_that_stops_answering_ends_the_test_as_host_crashed_quarantined_and_stops(
    pytester: pytest.Pytester,
    netns_lab: NetnsLab,
    frozen_host: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    before = mtu(netns_lab)
    a, b = netns_lab.hosts[0].name, netns_lab.hosts[1].name
    pytester.makepyfile(test_crashy=crashy(before))
    out, store = tmp_path / "frozen-at", tmp_path / "s.db"
    monkeypatch.setenv("OUT", str(out))
    monkeypatch.setenv("FREEZE", "1")
    started = time.monotonic()
    result = session(pytester, netns_lab, store)
    took = time.monotonic() - started

    assert out.exists(), f"the host was never frozen:\n{result.stdout.str()}"
    result.assert_outcomes(failed=1)  # test_after never ran: the session stopped
    result.stdout.fnmatch_lines(
        [
            f"hil: HostCrashed: {b}: host crashed (stopped answering) during "
            "*::test_change: no answer from its agent or SSH for * s (liveness bound 6 s)*",
            f"hil: host {b}: unreachable: *, during *::test_change: quarantined (its inventory "
            "entry has no power: that hil may cycle); the session stopped after it, 1 not run",
        ]
    )
    # Frozen after some seconds of setup; the test ended within the bound, not its 120 s
    # sleep; the session's end waits for the frozen host's agent to close (its bound).
    assert took < 90, result.stdout.str()
    assert mtu(netns_lab) == before  # host A restored by the session's teardown
    with open_store(str(store)) as s:
        (attempt,) = s.attempts()
        assert attempt.test.endswith("::test_change") and attempt.outcome == "host crashed"
        assert attempt.hosts == (a, b)
        (health,) = s.host_health([b])
        assert health.state == "quarantined" and health.manual
        assert "crashed during" in health.reason and "test_change" in health.reason
        kinds = [r.event for r in s.host_history(b)]
        assert "unreachable" in kinds
        assert s.leases() == [] and s.journal_entries(a) == []


def test_a_crasher_is_not_run_again_unless_asked_and_a_dead_runs_marker_is_reported(
    pytester: pytest.Pytester, netns_lab: NetnsLab, tmp_path: Path
) -> None:
    a, b = netns_lab.hosts[0].name, netns_lab.hosts[1].name
    pytester.makepyfile(test_crashy=crashy(mtu(netns_lab)))
    store = tmp_path / "s.db"
    with open_store(str(store)) as s:
        crashed = s.begin_attempt("test_crashy.py::test_change", "x", (a, b), "gone-lease-1")
        s.end_attempt(crashed, "host crashed")
        dead = s.begin_attempt("test_crashy.py::test_after", "x", (a, b), "gone-lease-2")

    result = session(pytester, netns_lab, store)
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines(
        [
            f"hil: attempt {dead}: test_crashy.py::test_after on pair x * never ended: its run "
            "died during it; if a host went down then, this test is the likely cause",
            f"SKIPPED * hil: not run: it crashed a host before (attempt {crashed}: *host "
            "crashed); --hil-rerun-crashers runs it again",
        ]
    )
    with open_store(str(store)) as s:
        assert [x.outcome for x in s.attempts() if x.id == dead] == ["run died"]

    # The session's SSH and agents connected by a test before it, outside its bound.
    pytester.makepyfile(test_a_connect=CONNECT_FIRST)
    again = session(
        pytester,
        netns_lab,
        store,
        "--hil-rerun-crashers",
        "-k",
        "test_connect or test_change",
        "--hil-timeout-test",
        "2",
    )
    # Run again, as asked: it is not skipped (FREEZE unset: it only overruns its bound).
    again.assert_outcomes(passed=1, failed=1)
    again.stdout.fnmatch_lines(["*Timeout (test layer, 2 s)*test_change*"])
    with open_store(str(store)) as s:
        assert json.dumps([x.outcome for x in s.attempts(limit=1)]) == '["timed out"]'
