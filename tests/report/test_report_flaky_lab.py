"""A suite test on the virtual lab's pair through the nightly's pipeline, with the test in
a quarantine list: the outcome history records the pair and the provider the run really
used, and the report marks the test known flaky (tag, issue link, Allure's flaky flag).

The flip ranking itself is tested on crafted histories (test_report_flaky.py) and over
four nights of a stand-in suite (test_report_flaky_pipeline.py): a real product test
cannot be made to flip on demand.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from vlab import VirtualLab

from hil.report import flaky, pipeline

pytestmark = [
    pytest.mark.lab,
    pytest.mark.skipif(
        not pipeline.DEFAULT_ALLURE.exists(),
        reason="needs the Allure generator in .tools (ci/install installs it)",
    ),
]

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 600.0  # a TCG pair: setup, agents, one connect each way, the report
TEST = "suites/test_connect.py::test_connect_with_no_listener_is_refused[a-b]"
KNOWN_FLAKY = """
- test: suites/test_connect.py::test_connect_with_no_listener_is_refused
  reason: a stand-in entry of this test
  issue: https://tracker.example/hil/14
  since: 2026-12-01
"""


def test_a_lab_night_records_pair_provider_and_the_known_flaky_mark(
    virtual_lab: VirtualLab, tmp_path: Path
) -> None:
    listed = tmp_path / "known-flaky.yaml"
    listed.write_text(KNOWN_FLAKY)
    reports = tmp_path / "reports"
    argv = [
        sys.executable, "-m", "hil.report.pipeline", TEST,
        "--reports", str(reports),
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

    (outcome,) = flaky.load(reports / flaky.OUTCOMES_HISTORY)
    assert (outcome.run, outcome.test, outcome.status) == (1, TEST, "passed")
    assert outcome.pair == virtual_lab.pair.name
    assert outcome.provider == "siw"  # what pair setup found on both guests
    assert outcome.known_flaky and outcome.category is None

    report = reports / "latest" / "report"
    (case,) = [json.loads(p.read_text()) for p in (report / "data" / "test-cases").glob("*")]
    assert case["flaky"] is True and case["status"] == "passed"
    assert {"name": "tag", "value": "known-flaky"} in case["labels"]
    assert {"name": "nodeid", "value": TEST} in case["labels"]
    assert case["links"][0]["url"] == "https://tracker.example/hil/14"
    summary = (report / flaky.SUMMARY_FILE).read_text()
    assert summary.startswith("1 passed, 0 failed, 0 broken, 0 skipped; report ")
