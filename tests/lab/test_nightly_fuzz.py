"""``ci/nightly --fuzz-cases N``: ``hil peer fuzz`` after the suites, on the night's pair and
seed, its exit folded into the nightly's (the stand-ins of test_nightly_kernels log each call)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from test_nightly_kernels import PYTHON_BODY, STUB, nightly, repo, run

__all__ = ["repo"]  # the fixture, used by name

FUZZ_EXIT = 'case "$*" in *"peer fuzz"*) exit {code} ;; esac'


def _hil_fuzz_exits(repo: Path, code: int) -> None:
    hil = repo / ".venv" / "bin" / "hil"
    hil.write_text(STUB.format(name="hil", up="../../", body=FUZZ_EXIT.format(code=code)))


def test_the_fuzz_runs_after_the_suites_on_the_pair_with_the_nights_seed(repo: Path) -> None:
    status, calls = nightly(
        repo, "--inventory", "i.yaml", "--pair", "p-1", "--reports", "R", "--fuzz-cases", "50"
    )
    assert status == 0
    seed = time.strftime("%Y%m%d", time.gmtime())
    assert calls[-1] == (
        f"hil --inventory i.yaml peer fuzz p-1 --seed {seed} --cases 50 --out R/fuzz"
    )
    assert [c for c in calls if "hil.report.pipeline" in c]  # the suites ran first


def _first_pair(repo: Path) -> None:
    python = repo / ".venv" / "bin" / "python"
    body = PYTHON_BODY.replace('case "$*" in', 'case "$*" in *load_from_args*) echo lab-0-1 ;;')
    python.write_text(STUB.format(name="python", up="../../", body=body))


def test_without_a_pair_the_fuzz_takes_the_inventorys_first(repo: Path) -> None:
    _first_pair(repo)
    _, calls = nightly(repo, "--inventory", "i.yaml", "--fuzz-cases", "3")
    assert calls[-1].startswith("hil --inventory i.yaml peer fuzz lab-0-1 --seed ")


def test_the_debug_lab_fuzzes_its_own_lab_into_its_reports(repo: Path) -> None:
    _first_pair(repo)
    _, calls = nightly(repo, "--debug-lab", "--lab-dir", "/tmp/d", "--fuzz-cases", "9")
    (fuzz,) = [c for c in calls if "peer fuzz" in c]
    assert fuzz.startswith("hil --inventory /tmp/inventory.yaml peer fuzz lab-0-1 --seed ")
    assert fuzz.endswith("--cases 9 --out artifacts/reports/nightly/6.1-debug/fuzz")
    assert calls[-1] == "hil lab down --dir /tmp/d-6.1-debug"  # after the fuzz


def test_no_fuzz_unless_asked(repo: Path) -> None:
    _, calls = nightly(repo, "--inventory", "i.yaml", "--pair", "p-1")
    assert not [c for c in calls if "peer fuzz" in c]


@pytest.mark.parametrize(("fuzz", "status"), [(0, 0), (4, 1), (3, 3), (5, 3)])
def test_findings_are_failures_and_the_rest_lab_errors(repo: Path, fuzz: int, status: int) -> None:
    _hil_fuzz_exits(repo, fuzz)
    got, _ = nightly(repo, "--inventory", "i.yaml", "--pair", "p-1", "--fuzz-cases", "2")
    assert got == status


def test_a_bad_number_of_cases_is_refused(repo: Path) -> None:
    out = run(repo, "--fuzz-cases", "many")
    assert out.returncode == 1
    assert "--fuzz-cases takes a whole number of cases, not many" in out.stderr
