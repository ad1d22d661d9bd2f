"""``ci/nightly --kernels``, ``--debug-lab`` and ``--interop``: one run per kernel (or per
way round of a mixed pair), each on its own lab; ``--middlebox``: the impairment suite on
a middlebox lab of its own; ``--reverts``: the revert score of bench/reverts/run.py.

ci/nightly runs in a copy of the repository's ci/ whose ``ci/install``,
``.venv/bin/hil`` and ``.venv/bin/python`` are stand-ins that log their
argument lists (the lab and the pipeline are not what is tested here: a
real --debug-lab night ran on the debug lab, docs/notes/debug-lab-nights.md).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from ci_stubs import ci_copy

# `lab up` prints an inventory path; the pipeline exits with the status its kernel's
# label asks for (6.12: 1), else logs the PYTEST_ADDOPTS it was given.
HIL_BODY = '[ "$1 $2" != "lab up" ] || echo /tmp/inventory.yaml'
PYTHON_BODY = """case "$*" in
    *default_dir*) echo /tmp/labs/lab ;;
    *nightly_s*) echo 0 ;;
    *kernel=6.12*) exit 1 ;;
    *hil.report.pipeline*) echo "PYTEST_ADDOPTS=$PYTEST_ADDOPTS" >>"${0%/*}/../../calls.log" ;;
esac"""


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return ci_copy(tmp_path, "nightly", HIL_BODY, PYTHON_BODY)


def run(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(repo / "ci" / "nightly"), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={"PATH": "/usr/bin:/bin", "HOME": str(repo)},
    )


def nightly(repo: Path, *args: str) -> tuple[int, list[str]]:
    out = run(repo, *args)
    log = repo / "calls.log"
    return out.returncode, log.read_text().splitlines() if log.exists() else [out.stderr]


def lab_runs(calls: list[str]) -> list[str]:
    """The calls that build, boot or stop a lab, or run the suites, in order."""
    return [c for c in calls if c.startswith(("hil ", "python -m"))]


def test_each_kernel_runs_on_its_own_lab_into_its_own_reports(repo: Path) -> None:
    status, calls = nightly(
        repo, "--kernels", "6.1,6.12", "--reports", "R", "--suite", "s.py", "--", "-k", "x"
    )
    assert status == 1  # the worst run's: 6.12's pipeline failed
    runs = lab_runs(calls)
    assert runs == [
        "hil lab kernel --source 6.1",
        "hil lab up --dir /tmp/labs/lab-6.1 --kernel 6.1",
        "python -m hil.report.pipeline s.py --inventory /tmp/inventory.yaml "
        "--reports R/6.1 -- -k x --hil-metric-label kernel=6.1",
        "hil lab down --dir /tmp/labs/lab-6.1",
        "hil lab kernel --source 6.12",
        "hil lab up --dir /tmp/labs/lab-6.12 --kernel 6.12",
        runs[6],
        "hil lab down --dir /tmp/labs/lab-6.12",
    ]
    assert runs[6].endswith("--reports R/6.12 -- -k x --hil-metric-label kernel=6.12")
    assert "install --kernel-sources 6.1,6.12" in calls


def test_a_mixed_pair_runs_both_ways_round_each_on_its_own_lab(repo: Path) -> None:
    status, calls = nightly(repo, "--interop", "6.1:6.12", "--reports", "R", "--", "-k", "x")
    assert status == 1  # the worse run's: the swapped one's pipeline (kernel=6.12-6.1) failed
    runs = lab_runs(calls)
    assert runs == [
        "hil lab kernel --source 6.12",
        "hil lab kernel --source 6.1",
        "hil lab up --dir /tmp/labs/lab-6.1-6.12 --kernel-a 6.1 --kernel-b 6.12",
        "python -m hil.report.pipeline suites --inventory /tmp/inventory.yaml "
        "--reports R/6.1-6.12 -- -k x --hil-metric-label kernel=6.1-6.12",
        "hil lab down --dir /tmp/labs/lab-6.1-6.12",
        "hil lab kernel --source 6.1",
        "hil lab kernel --source 6.12",
        "hil lab up --dir /tmp/labs/lab-6.12-6.1 --kernel-a 6.12 --kernel-b 6.1",
        "python -m hil.report.pipeline suites --inventory /tmp/inventory.yaml "
        "--reports R/6.12-6.1 -- -k x --hil-metric-label kernel=6.12-6.1",
        "hil lab down --dir /tmp/labs/lab-6.12-6.1",
    ]
    assert "install --kernel-sources 6.1,6.12" in calls


def test_a_kernel_source_that_cannot_be_installed_names_the_packages_and_the_command(
    repo: Path,
) -> None:
    install = repo / "ci" / "install"
    install.write_text('#!/usr/bin/env bash\n[ "$1" != --kernel-sources ] || exit 100\n')
    out = run(repo, "--kernels", "6.1,6.12")
    assert out.returncode == 3
    assert out.stderr.strip().endswith(
        "ci/nightly: ci/install --kernel-sources 6.1,6.12 failed: each kernel is built from its "
        "Debian source package (linux-source-6.1 linux-source-6.12); run that as root, or "
        "apt-get install linux-source-6.1 linux-source-6.12"
    )
    assert "hil " not in (repo / "calls.log").read_text()  # no kernel built, no lab started


def test_the_debug_lab_runs_the_regression_device_removal_and_race_suites_on_the_debug_kernel(
    repo: Path,
) -> None:
    status, calls = nightly(repo, "--debug-lab", "--lab-dir", "/tmp/d", "--", "-x")
    assert status == 0
    assert "hil lab kernel --source 6.1 --debug" in calls
    assert "hil lab up --dir /tmp/d-6.1-debug --kernel 6.1 --debug" in calls
    (pipeline,) = [c for c in calls if "hil.report.pipeline" in c]
    assert pipeline.startswith(
        "python -m hil.report.pipeline suites/test_regressions.py suites/test_device_removal.py "
        "suites/test_races.py "
    )
    assert "--reports artifacts/reports/nightly/6.1-debug" in pipeline
    # Bounded sweeps (full ones would hold a KASAN lab half an hour or more) before the
    # pytest arguments asked for (pytest takes an option's last value: a --hil-race-sweeps
    # full there wins), and a cold agent's handshake on a debug guest takes more than the
    # default 30 s bound.
    assert pipeline.endswith(
        "-- --hil-race-sweeps bounded --hil-race-scale 8 -x --hil-timeout-agent 120 "
        "--hil-metric-label kernel=6.1-debug"
    )


def test_reverts_runs_the_revert_score_under_the_lab_lock_keeping_its_logs(repo: Path) -> None:
    status, calls = nightly(repo, "--reverts", "--reports", "R", "--lab-lock", "/tmp/l.lock")
    assert status == 0
    runs = [c for c in calls if c.startswith(("hil ", "python "))]
    assert len(runs) == 1 and runs[0].startswith(
        "python bench/reverts/run.py --lock /tmp/l.lock --keep R/reverts/"
    )  # no lab of the nightly's own, no suites: the runner boots one per revert kernel
    assert "install --kernel-sources 6.1,6.12" in calls  # a revert is of the 6.12 tree


def test_middlebox_runs_the_impairment_suite_on_a_middlebox_lab_of_its_own(repo: Path) -> None:
    status, calls = nightly(repo, "--middlebox", "--reports", "R", "--", "-k", "loss")
    assert status == 0
    runs = lab_runs(calls)
    assert runs == [
        "hil lab kernel",
        "hil lab up --dir /tmp/labs/lab-middlebox --middlebox",
        "python -m hil.report.pipeline suites/test_impairment.py --inventory /tmp/inventory.yaml "
        "--reports R/middlebox -- -k loss --hil-metric-label lab=middlebox",
        "hil lab down --dir /tmp/labs/lab-middlebox",
    ]


def test_middlebox_runs_the_suites_given_instead(repo: Path) -> None:
    status, calls = nightly(repo, "--middlebox", "--lab-dir", "/tmp/m", "--suite", "s.py")
    assert status == 0
    assert "hil lab up --dir /tmp/m-middlebox --middlebox" in calls
    (pipeline,) = [c for c in calls if "hil.report.pipeline" in c]
    assert pipeline.startswith("python -m hil.report.pipeline s.py --inventory ")


def test_the_nightly_sweeps_every_race_at_its_full_budget(repo: Path) -> None:
    # suites/test_races.py's bounded sweeps are ci/suites'; the nightly asks for the full ones.
    status, calls = nightly(repo, "--lab-dir", "/tmp/d")
    assert status == 0
    assert "PYTEST_ADDOPTS=--hil-race-sweeps full" in calls


@pytest.mark.parametrize(
    "args, message",
    [
        (["--kernels", "6.1,latest"], "--kernels takes kernel series separated by commas"),
        (["--debug-lab", "--inventory", "lab.yaml"], "boot virtual labs; not with an inventory"),
        (["--interop", "6.1"], "--interop takes host A's and host B's kernel series"),
        (["--interop", "6.1:6.12", "--kernels", "6.1"], "runs its own two labs; not with"),
        (["--middlebox", "--inventory", "lab.yaml"], "--middlebox boots a virtual lab of its own"),
        (["--middlebox", "--kernels", "6.12"], "--middlebox boots a virtual lab of its own"),
    ],
)
def test_a_bad_matrix_is_refused_before_anything_runs(
    repo: Path, args: list[str], message: str
) -> None:
    status, calls = nightly(repo, *args)
    assert status == 1
    assert len(calls) == 1 and message in calls[0]
