"""Crashes during a test on the session's virtual lab (hil/plugin/crash.py, real QEMU guests).

One pytest session on the lab's pair, four CM tests: the first pulls the pair's
cable in QEMU (a change that outlives a reboot and sits in the restore journal)
and SIGKILLs a guest's QEMU in the middle of its test, the third freezes the
other guest with QMP ``stop``, and the tests after each must run on the pair
again.  Each crashed test must end within the liveness bound as "host crashed",
with the guest's console attached; the guest is recovered through the lab's QMP
power (its QEMU stopped and started again), its journal replayed, its health
checked, the pair restored and set up again (the cable plugged in again before
the next test), and the session goes on.  About 1.5-2 minutes (two guest
restarts on TCG); it restarts guests, so it runs after the others.  A kernel
crash is recovered the same way: tests/test_crash_nightly.py (a panic) and
tests/run/test_peercase_lab.py (siw's NULL dereference under a fuzz case).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from vlab import VirtualLab

from hil.report.categories import HOST_CRASHED, categories, category_in
from hil.reservation import open_store
from tests.report.allureresults import all_attachments

pytest_plugins = ["pytester"]
pytestmark = [pytest.mark.lab, pytest.mark.restarts_guests]

# The liveness bound: each crash is declared this long after its host's last answer.
# 6 s, the bound tests/host/test_liveness_lab.py watches these TCG guests with (its
# live guest is never declared crashed); 10 s before 2026-12-05.
BOUND = 6
# host_b's QEMU is killed in the middle of test_killed; host_a is frozen in test_frozen.
SUITE = """
import json, os, signal, time
from pathlib import Path
import pytest
from hil.host.linkctl import LinkControl
from hil.lab.qmp import QMPClient

# One variant (a guest crashes once): direction and family pinned.
pytestmark = pytest.mark.parametrize(("direction", "family"), [("a-b", "ipv4")])

def guest(name):
    state = json.loads((Path(os.environ["LAB_DIR"]) / "lab.json").read_text())
    return next(g for g in state["guests"] if g["name"] == name)

def mark(what):
    with open(os.environ["OUT"], "a") as f:
        f.write(f"{what} {time.monotonic()}\\n")

def test_killed(cm, hil_pair, hil_run, direction):
    cm.run("connect")
    LinkControl(hil_run.hosts, hil_run.journal).pull(hil_pair.pair.name, "carrier")
    os.kill(guest(hil_pair.pair.host_b.name)["pid"], signal.SIGKILL)
    mark("killed")
    cm.run("connect")  # its host gone under it: fails, then the watch says why
    time.sleep(300)

def test_after_kill(cm, contract, hil_pair, hil_run, direction):
    state = LinkControl(hil_run.hosts, hil_run.journal).state(hil_pair.pair.name)
    assert state.pulled == () and state.a.carrier and state.b.carrier, state
    contract(cm.run("connect"))

def test_frozen(cm, hil_pair, direction):
    with QMPClient(guest(hil_pair.pair.host_a.name)["qmp"]) as monitor:
        monitor.execute("stop")
    mark("frozen")
    cm.run("connect")  # blocks on the frozen host until the watch ends the test
    time.sleep(300)

def test_after_freeze(cm, contract, direction):
    contract(cm.run("connect"))
"""


def test_a_guest_killed_and_a_guest_frozen_mid_test_are_host_crashed_recovered_and_the_session_goes_on(  # noqa: E501
    pytester: pytest.Pytester,
    virtual_lab: VirtualLab,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    a, b = (h.name for h in virtual_lab.pair.hosts)
    out, store, results = tmp_path / "marks", tmp_path / "store.db", tmp_path / "allure"
    monkeypatch.setenv("LAB_DIR", str(virtual_lab.dir))
    monkeypatch.setenv("OUT", str(out))
    pytester.makepyfile(test_lab_crashes=SUITE)
    result = pytester.runpytest_subprocess(
        "-p",
        "no:cacheprovider",
        "--rootdir",
        str(pytester.path),
        "--hil-inventory",
        str(virtual_lab.inventory.path),
        "--hil-store",
        str(store),
        "--hil-liveness",
        str(BOUND),
        "--hil-wire",
        "off",
        f"--alluredir={results}",
        "-rA",
        timeout=900,
    )
    text = result.stdout.str()
    marks = out.read_text().split() if out.exists() else []
    assert marks[0::2] == ["killed", "frozen"], f"the scenario did not happen:\n{text}"

    result.assert_outcomes(passed=2, failed=2)
    result.stdout.fnmatch_lines(
        [
            f"hil: HostCrashed: {b}: host crashed (stopped answering) during "
            "test_lab_crashes.py::test_killed[[]a-b-ipv4[]]: no answer from its agent or SSH *",
            f"hil: HostCrashed: {a}: host crashed (stopped answering) during "
            "test_lab_crashes.py::test_frozen[[]a-b-ipv4[]]: no answer from its agent or SSH *",
        ]
    )
    result.stdout.fnmatch_lines(
        [
            f"hil: host {b}: unreachable: *, during "
            "test_lab_crashes.py::test_killed[[]a-b-ipv4[]]: "
            "recovered, the pair set up again; the session went on",
            f"hil: host {a}: unreachable: *, during "
            "test_lab_crashes.py::test_frozen[[]a-b-ipv4[]]: "
            "recovered, the pair set up again; the session went on",
        ]
    )
    with open_store(str(store)) as s:
        outcomes = {x.test.split("::")[1]: x.outcome for x in s.attempts()}
        assert outcomes == {
            "test_killed[a-b-ipv4]": "host crashed",
            "test_after_kill[a-b-ipv4]": "passed",
            "test_frozen[a-b-ipv4]": "host crashed",
            "test_after_freeze[a-b-ipv4]": "passed",
        }
        for host in (a, b):
            (health,) = s.host_health([host])
            assert health.state == "healthy", health  # the recovery's health check passed
            events = [r.event for r in s.host_history(host)]
            assert "unreachable" in events and "check_passed" in events, events
            assert s.journal_entries(host) == []
        assert s.leases() == []
    _check_allure(results, a, b)


def _check_allure(results: Path, a: str, b: str) -> None:
    """Each crashed test: failed, in the Host crashed category, its guest's console attached."""
    cats = categories()
    crashed = {}
    for path in results.glob("*-result.json"):
        r = json.loads(path.read_text())
        message = r.get("statusDetails", {}).get("message", "")
        if r["status"] == "failed":
            crashed[r["name"]] = (category_in(cats, r["status"], message), r)
    assert set(crashed) == {"test_killed[a-b-ipv4]", "test_frozen[a-b-ipv4]"}
    for name, host in (("test_killed[a-b-ipv4]", b), ("test_frozen[a-b-ipv4]", a)):
        category, r = crashed[name]
        assert category == HOST_CRASHED, r.get("statusDetails")
        # Attached when the test's TestRun finished: under its fixtures' tear-down.
        every = all_attachments(results, r)
        attachments = [x for x in every if x["name"].startswith("kernel log of")]
        (log,) = attachments
        assert log["name"].startswith(f"kernel log of {host} before the crash (console ")
        console = (results / log["source"]).read_text()
        assert console.strip(), "the guest's console tail is empty"
