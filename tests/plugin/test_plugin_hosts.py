"""The plugin's host fixtures against the netns lab: real sshd, agent and netlink."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from netnslab import NetnsLab

from hil.reservation import open_store

pytest_plugins = ["pytester"]

CHANGE_MTU = """
import os
from hil.host.journal import agent_undo

def test_change(hil_pair, hil_hosts, hil_journal):
    host = hil_pair.pair.host_a.name
    hil_journal.change(host, agent_undo("set_link", "restore mtu", netdev="data0", mtu={mtu}))
    hil_hosts.agent(host).set_link("data0", mtu=1400)
    assert hil_hosts.agent(host).link("data0").mtu == 1400
    {after}
"""


def mtu(lab: NetnsLab) -> int:
    links = json.loads(lab.exec(0, ["ip", "-j", "link", "show", "dev", "data0"]).stdout)
    return int(links[0]["mtu"])


def run(pytester: pytest.Pytester, lab: NetnsLab, store: Path, *extra: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess(
        "--hil-inventory",
        str(lab.inventory_path),
        "--hil-store",
        str(store),
        "-p",
        "no:cacheprovider",
        *extra,
    )


def test_changes_are_undone_at_session_end(
    pytester: pytest.Pytester, netns_lab: NetnsLab, tmp_path: Path
) -> None:
    before = mtu(netns_lab)
    pytester.makepyfile(CHANGE_MTU.format(mtu=before, after=""))
    run(pytester, netns_lab, tmp_path / "s.db").assert_outcomes(passed=1)
    assert mtu(netns_lab) == before


def test_sigterm_restores_the_pair_and_releases_the_lease(
    pytester: pytest.Pytester, netns_lab: NetnsLab, tmp_path: Path
) -> None:
    """A CI runner stops a job with SIGTERM: the session still undoes its changes and
    gives the pair back, at once, not only at the next reservation."""
    before = mtu(netns_lab)
    pytester.makepyfile(CHANGE_MTU.format(mtu=before, after="import time; time.sleep(120)"))
    store = tmp_path / "s.db"
    proc = pytester.popen(
        [
            sys.executable,
            "-m",
            "pytest",
            "--hil-inventory",
            str(netns_lab.inventory_path),
            "--hil-store",
            str(store),
            "-p",
            "no:cacheprovider",
        ],
        stdin=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 120
        while mtu(netns_lab) != 1400:
            assert proc.poll() is None, "the run ended before it changed the mtu"
            assert time.monotonic() < deadline, "the run did not change the mtu within 120 s"
            time.sleep(0.2)
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert b"KeyboardInterrupt" in out or b"SIGTERM" in out, out.decode()[-2000:]
    assert mtu(netns_lab) == before  # undone by the interrupted session itself
    with open_store(str(store)) as s:
        assert s.leases() == []
        assert s.journal_entries("ns0") == []


def test_killed_run_is_replayed_by_the_next_session(
    pytester: pytest.Pytester, netns_lab: NetnsLab, tmp_path: Path
) -> None:
    before = mtu(netns_lab)
    # The run dies in the middle of its test: no teardown, lease left to expire.
    pytester.makepyfile(CHANGE_MTU.format(mtu=before, after="os._exit(9)"))
    killed = run(pytester, netns_lab, tmp_path / "s.db", "--hil-ttl", "1")
    assert killed.ret == 9
    assert mtu(netns_lab) == 1400
    pytester.makepyfile(
        f"""
        def test_clean_start(hil_hosts, hil_pair):
            assert hil_hosts.agent(hil_pair.pair.host_a.name).link("data0").mtu == {before}
        """
    )
    run(pytester, netns_lab, tmp_path / "s.db", "--hil-wait", "20").assert_outcomes(passed=1)
    assert mtu(netns_lab) == before


def test_setup_without_rdma_names_host_and_netdev(
    pytester: pytest.Pytester, netns_lab: NetnsLab, tmp_path: Path
) -> None:
    # The host kernel has no RDMA: the siw fallback cannot work, and says so.
    pytester.makepyfile("def test_setup(hil_setup):\n    pass\n")
    result = run(pytester, netns_lab, tmp_path / "s.db")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        ["*hil: RemoteError: ns0: data0 (port p0): cannot create siw device*"]
    )
    result.stdout.no_fnmatch_line("*Traceback*")
