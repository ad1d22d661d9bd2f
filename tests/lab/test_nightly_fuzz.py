"""``ci/nightly --fuzz-cases N``: the pipeline runs ``hil peer fuzz`` after the suites and
before the report, on the night's seed (the stand-ins of test_nightly_kernels log each
call; the pipeline's side, the pair, the exit and the results: tests/report/test_report_fuzz.py)."""

from __future__ import annotations

import time
from pathlib import Path

from test_nightly_kernels import nightly, repo, run

__all__ = ["repo"]  # the fixture, used by name


def _seed() -> str:
    return time.strftime("%Y%m%d", time.gmtime())


def test_the_pipeline_gets_the_cases_and_the_nights_seed(repo: Path) -> None:
    status, calls = nightly(
        repo, "--inventory", "i.yaml", "--pair", "p-1", "--reports", "R", "--fuzz-cases", "50"
    )
    assert status == 0
    (pipeline,) = [c for c in calls if "hil.report.pipeline" in c]
    assert f"--fuzz-cases 50 --fuzz-seed {_seed()} --pair p-1 --reports R" in pipeline
    assert not [c for c in calls if "peer fuzz" in c]  # the pipeline runs it, not the script


def test_the_debug_lab_fuzzes_its_own_lab_into_its_reports(repo: Path) -> None:
    _, calls = nightly(repo, "--debug-lab", "--lab-dir", "/tmp/d", "--fuzz-cases", "9")
    (pipeline,) = [c for c in calls if "hil.report.pipeline" in c]
    assert "--inventory /tmp/inventory.yaml " in pipeline
    assert f"--fuzz-cases 9 --fuzz-seed {_seed()} " in pipeline
    assert "--reports artifacts/reports/nightly/6.1-debug" in pipeline
    assert calls[-1] == "hil lab down --dir /tmp/d-6.1-debug"  # after the pipeline


def test_no_fuzz_unless_asked(repo: Path) -> None:
    _, calls = nightly(repo, "--inventory", "i.yaml", "--pair", "p-1")
    (pipeline,) = [c for c in calls if "hil.report.pipeline" in c]
    assert "--fuzz" not in pipeline


def test_a_bad_number_of_cases_is_refused(repo: Path) -> None:
    out = run(repo, "--fuzz-cases", "many")
    assert out.returncode == 1
    assert "--fuzz-cases takes a whole number of cases, not many" in out.stderr
