"""Two suite tests on the virtual lab's pair through the nightly's pipeline, one of them in
a quarantine list: the outcome history records the pair and the provider the run really
used, and the report marks the test known flaky (tag, issue link, Allure's flaky flag).
The other, a connect, records the real connect latency: the metrics history keeps it
(labelled with its scenario), the trend page draws it and ``--threshold`` flags it.

The flip ranking itself is tested on crafted histories (test_report_flaky.py) and over
four nights of a stand-in suite (test_report_flaky_pipeline.py): a real product test
cannot be made to flip on demand.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from vlab import VirtualLab

from hil.report import flaky, metrics_history, pipeline
from hil.report.svgdraw import BAD_COLOR

pytestmark = [
    pytest.mark.lab,
    pytest.mark.skipif(
        not pipeline.DEFAULT_ALLURE.exists(),
        reason="needs the Allure generator in .tools (ci/install installs it)",
    ),
]

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 600.0  # a TCG pair: setup, agents, one connect each way, the report
TEST = "suites/test_connect.py::test_connect_with_no_listener_is_refused[a-b-ipv4]"
CONNECT = (
    "suites/test_connect.py::test_connect_establishes_both_sides_and_carries_private_data[a-b-ipv4]"
)
SVG = "{http://www.w3.org/2000/svg}"
KNOWN_FLAKY = """
- test: suites/test_connect.py::test_connect_with_no_listener_is_refused
  reason: a stand-in entry of this test
  issue: https://tracker.example/hil/14
  since: 2026-12-01
"""


def test_a_lab_night_records_pair_provider_known_flaky_and_metrics(
    virtual_lab: VirtualLab, tmp_path: Path
) -> None:
    listed = tmp_path / "known-flaky.yaml"
    listed.write_text(KNOWN_FLAKY)
    reports = tmp_path / "reports"
    argv = [
        sys.executable, "-m", "hil.report.pipeline", TEST, CONNECT,
        "--reports", str(reports), "--threshold", "connect_us>1",
        "--inventory", str(virtual_lab.inventory.path),
        "--pair", virtual_lab.pair.name,
        "--",
        "--hil-store", str(tmp_path / "store.db"),
        f"--hil-known-flaky={listed}",
    ]  # fmt: skip
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=TIMEOUT, cwd=ROOT, check=False
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"the pipeline did not finish within {TIMEOUT:.0f} s")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "hil report: flaky: no test flipped between pass and fail in the last night" in (
        done.stdout
    )

    by_test = {o.test: o for o in flaky.load(reports / flaky.OUTCOMES_HISTORY)}
    outcome, connect = by_test[TEST], by_test[CONNECT]
    assert (outcome.run, outcome.test, outcome.status) == (1, TEST, "passed")
    assert (connect.test, connect.status) == (CONNECT, "passed")
    assert outcome.pair == virtual_lab.pair.name
    assert outcome.provider == "siw"  # what pair setup found on both guests
    assert outcome.known_flaky and outcome.category is None

    report = reports / "latest" / "report"
    cases = [json.loads(p.read_text()) for p in (report / "data" / "test-cases").glob("*")]
    (case,) = [c for c in cases if c["name"].startswith("test_connect_with_no_listener")]
    assert case["flaky"] is True and case["status"] == "passed"
    assert {"name": "tag", "value": "known-flaky"} in case["labels"]
    assert {"name": "nodeid", "value": TEST} in case["labels"]
    assert case["links"][0]["url"] == "https://tracker.example/hil/14"
    summary = (report / flaky.SUMMARY_FILE).read_text()
    assert summary.startswith("2 passed, 0 failed, 0 broken, 0 skipped; report ")

    # The connect's real latency: in the history, on the trend page, flagged (> 1 us).
    (night,) = metrics_history.load(reports / metrics_history.HISTORY)
    latency = night.series["connect_us{scenario=connect}"]
    assert latency.count == 1 and 0 < latency.mean < 60e6 and latency.unit == "us"
    svg = ET.fromstring((report / "metrics" / "connect_us_scenario_connect.svg").read_text())
    (dot,) = svg.findall(f"{SVG}circle")
    assert dot.findtext(f"{SVG}title", "").startswith("run 1: mean ")
    assert dot.get("stroke") == BAD_COLOR  # the threshold flagged it
    flagged = r"\n  connect_us\{scenario=connect\} mean [0-9.]+ (us|ms|s) > [0-9.]+ (us|ms|s) "
    assert re.search(flagged + r"\(--threshold\)\n", summary), summary
