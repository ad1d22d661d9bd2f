"""The hardware evidence in real allure-pytest results, by ``--hil-hw-evidence``.

The snapshots are the recorded T6 pair's (tests/fake_hosts.py), t6a's
``ethtool -S`` and debugfs changed between before and after, told to the
report's observer as a TestRun tells it (``evidence``, then ``test_finished``
with every verdict, the after-test checks' among them); the observer decides
whether to attach them.  The TestRun itself, with a real ``ethtool -S`` of a
siw guest, runs in tests/plugin/test_plugin_fixtures_lab.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from allureresults import JSON_NAME, NAME, all_attachments, results

pytest_plugins = ["pytester"]

REPO = Path(__file__).resolve().parents[2]

SUITE = """
import sys
sys.path.insert(0, {repo!r})

import pytest
from hil.host import hwevidence
from hil.host.hwevidence import HwEvidence
from hil.report.plugin import OBSERVER_KEY, failed
from hil.run.observer import EvidenceReport, TestResult
from tests.fake_hosts import T6_NETDEV, t6_hosts

DIR = "/sys/kernel/debug/iw_cxgb4/0000:81:00.4"

@pytest.fixture(autouse=True)
def hw(request, tmp_path):
    t6a = t6_hosts(tmp_path).recorded("t6a")
    target = hwevidence.locate(t6a, "t6a", T6_NETDEV, "cxgb4_0", "iw_cxgb4")
    before = hwevidence.snapshot(t6a, target)
    yield
    qps = t6a.file(DIR + "/qps")
    qps.write_text(qps.read_text().replace("\\0", "") + "qp sq id 9 rq id 10 state 0 onchip 0\\n")
    stats = t6a.run(["ethtool", "-S", T6_NETDEV]).stdout
    t6a.record("ethtool -S " + T6_NETDEV, stats.replace(": 4286416", ": 4286420"))
    after = hwevidence.snapshot(t6a, target)
    observer = request.config.stash[OBSERVER_KEY]
    observer.evidence(EvidenceReport(None, HwEvidence({{"t6a": before}}, {{"t6a": after}})))
    checks = ("after-test checks FAILED",) if "checks_fail" in request.node.name else ()
    outcome = "failed" if failed(request.node) else "passed"
    observer.test_finished(
        TestResult(request.node.nodeid, outcome, (), None, None, None, checks, ())
    )
    if checks:
        pytest.fail(checks[0], pytrace=False)

def test_passes():
    pass

def test_fails():
    assert False, "product failure on purpose"

def test_after_test_checks_fail():
    pass
"""

EXPECTED = {
    "failed": {"test_fails", "test_after_test_checks_fail"},
    "all": {"test_passes", "test_fails", "test_after_test_checks_fail"},
    "off": set(),
}


@pytest.mark.parametrize("mode", ["failed", "all", "off"])
def test_the_evidence_goes_to_the_tests_the_option_names(
    pytester: pytest.Pytester, mode: str
) -> None:
    pytester.makepyfile(test_hw=SUITE.format(repo=str(REPO)))
    out = pytester.path / "allure"
    run = pytester.runpytest_subprocess(
        f"--alluredir={out}", f"--hil-hw-evidence={mode}", "-p", "no:cacheprovider"
    )
    run.assert_outcomes(passed=2, failed=1, errors=1)
    attached = {}
    for r in results(out):
        found = {a["name"]: a for a in all_attachments(out, r)}
        if NAME in found:
            attached[r["name"]] = (found[NAME], found[JSON_NAME])
    assert set(attached) == EXPECTED[mode]
    for text_att, json_att in attached.values():
        text = (out / text_att["source"]).read_text()
        assert "== t6a (enp129s0f4)" in text
        assert "ethtool -S enp129s0f4: 1 of " in text and "tx_frames_ok" in text
        assert "+4" in text
        assert "debugfs /sys/kernel/debug/iw_cxgb4/0000:81:00.4: QPs 2 -> 3" in text
        data = json.loads((out / json_att["source"]).read_text())
        assert data["t6a"]["changed"] == [
            {"name": "tx_frames_ok", "before": 4286416, "after": 4286420, "delta": 4}
        ]
