"""Issue 14's "done means": a nightly on the virtual lab where a guest panics mid-run.

``ci/nightly`` itself, on the session's running lab (``--lab-dir``: reused,
left up), runs a suite of three CM tests written for this test: the second
panics guest B's kernel (``echo c > /proc/sysrq-trigger``, in the middle of
the test).  The nightly must finish, report that test as "host crashed"
(its Allure category, the panic from the guest's console attached), recover
the guest (its QEMU, gone with the panic, started again through the lab's
power), and run the third test on the pair.  About 1-1.5 minutes: the pipeline,
the liveness bound, one guest boot on TCG, the report.  It restarts a guest,
so it runs after the other tests.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from vlab import VirtualLab

from hil.report import flaky, pipeline
from hil.report.categories import HOST_CRASHED
from hil.reservation import open_store

pytestmark = [
    pytest.mark.lab,
    pytest.mark.restarts_guests,
    pytest.mark.skipif(
        not pipeline.DEFAULT_ALLURE.exists(),
        reason="needs the Allure generator in .tools (ci/install installs it)",
    ),
]

ROOT = Path(__file__).resolve().parents[1]
TIMEOUT = 900
# The liveness bound: each crash is declared this long after its host's last answer.
# 6 s, the bound tests/host/test_liveness_lab.py watches these TCG guests with (its
# live guest is never declared crashed); 10 s before 2026-12-05.
BOUND = 6
SUITE = """
import time
import pytest

# One variant (a guest crashes once): direction and family pinned.
pytestmark = pytest.mark.parametrize(("direction", "family"), [("a-b", "ipv4")])

def test_before(cm, contract, direction):
    contract(cm.run("connect"))

def test_panic(cm, hil_run, direction):
    cm.run("connect")
    b = hil_run.pair.host_b.name
    # The command never comes back: the kernel stops (and QEMU with it).
    hil_run.hosts.session(b).run(["sh", "-c", "echo c > /proc/sysrq-trigger"], timeout=60)
    time.sleep(300)

def test_after(cm, contract, direction):
    contract(cm.run("connect"))
"""


def test_a_nightly_where_a_guest_panics_finishes_reports_host_crashed_recovers_and_goes_on(
    virtual_lab: VirtualLab, tmp_path: Path
) -> None:
    b = virtual_lab.pair.host_b.name
    suite, reports, store = tmp_path / "night", tmp_path / "reports", tmp_path / "store.db"
    suite.mkdir()
    (suite / "test_night.py").write_text(SUITE)
    argv = [
        "ci/nightly", "--lab-dir", str(virtual_lab.dir), "--suite", str(suite),
        "--reports", str(reports), "--keep", "2", "--timeout", str(TIMEOUT),
        "--",
        "--hil-store", str(store), "--hil-liveness", str(BOUND), "--hil-wire", "off",
        "--rootdir", str(suite),
    ]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k not in ("HIL_INVENTORY", "HIL_LAB_DIR")}
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=TIMEOUT + 120, cwd=ROOT, env=env
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"the nightly did not finish within {TIMEOUT + 120} s")
    said = done.stdout + done.stderr
    # One test failed (the crash): exit 1, as for any failed test, not 3.
    assert done.returncode == 1, said[-4000:]
    assert "lab: already up in" in said  # the session's lab, reused
    assert "hil report: 2 passed, 1 failed, 0 broken, 0 skipped; report" in said, said[-4000:]
    assert f"hil: host {b}: kernel crash: " in said and "Kernel panic - not syncing" in said
    assert "recovered, the pair set up again; the session went on" in said

    outcomes = {o.test.split("::")[-1]: o for o in flaky.load(reports / flaky.OUTCOMES_HISTORY)}
    assert {t: o.status for t, o in outcomes.items()} == {
        "test_before[a-b-ipv4]": "passed",
        "test_panic[a-b-ipv4]": "failed",
        "test_after[a-b-ipv4]": "passed",
    }
    assert outcomes["test_panic[a-b-ipv4]"].category == HOST_CRASHED

    # The generated report: the test's message, and the guest's console with the panic.
    cases = [
        json.loads(p.read_text())
        for p in (reports / "latest" / "report" / "data" / "test-cases").glob("*.json")
    ]
    (case,) = [c for c in cases if c["name"] == "test_panic[a-b-ipv4]"]
    assert case["statusMessage"].startswith(f"Failed: hil: HostCrashed: {b}: host crashed (kernel")
    attachment = _attachment(case, f"kernel log of {b} before the crash (console ")
    console = (reports / "latest" / "report" / "data" / "attachments" / attachment).read_text()
    assert "Kernel panic - not syncing: sysrq triggered crash" in console

    with open_store(str(store)) as s:
        marks = {a.test.split("::")[-1]: a.outcome for a in s.attempts()}
        assert marks["test_panic[a-b-ipv4]"] == "host crashed"
        (health,) = s.host_health([b])
        assert health.state == "healthy"  # the recovery's health check passed
        assert "kernel_crash" in [r.event for r in s.host_history(b)]
        assert s.leases() == [] and s.journal_entries(b) == []


def _attachment(case: dict[str, object], prefix: str) -> str:
    """The source file of the test case's attachment whose name starts with ``prefix``."""
    found: list[str] = []

    def walk(node: object) -> None:
        if isinstance(node, dict):
            name = node.get("name")
            if isinstance(name, str) and name.startswith(prefix) and "source" in node:
                found.append(str(node["source"]))
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(case)
    assert found, f"no attachment {prefix}... in the report's test case"
    return found[0]
