"""bench/mutants: how a lab's JUnit report becomes a mutant's verdict, and the CLI's bad input."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from benchmod import load_bench

MUTANTS = Path(__file__).resolve().parents[2] / "bench" / "mutants"


def _outcomes() -> ModuleType:
    return load_bench("mutant_outcomes", "mutants/outcomes.py")


out = _outcomes()

JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest">
  <testcase classname="suites.test_close" name="test_passes"/>
  <testcase classname="suites.test_close" name="test_contract">
    <failure message="Failed: contract FAILED: 2 violations">contract FAILED: 2 violations
  [disconnected-once] (invariant 7, profile siw) two DISCONNECTED on a-1
  [no-event-after-destroy] (profile siw) ESTABLISHED after destroy</failure>
  </testcase>
  <testcase classname="suites.test_close" name="test_wire">
    <error message='failed on teardown with "Failed: wire FAILED: 1 violation'>wire FAILED
  [fin-after-close] fail no FIN seen</error>
  </testcase>
  <testcase classname="suites.test_close" name="test_not_captured">
    <error message='failed on teardown with "Failed: hil: LabError: not judged: x'>e</error>
  </testcase>
  <testcase classname="suites.test_close" name="test_setup_broke">
    <error message="failed on setup with &quot;HostError: ssh timed out&quot;">trace</error>
  </testcase>
  <testcase classname="suites.test_close" name="test_peer">
    <failure message="AssertionError: peer scenario mpa-bad-key against siw: FAILED">
E  AssertionError: peer scenario mpa-bad-key against siw: FAILED
E      - expected close 'fin', the peer saw 'none' [siw_cm.c:627-628 (Linux 6.1.192); RFC 5044]
E      - expected cm events none in order, the DUT saw ['connect_request'] [RFC 5044 7.1.1]
E      - step 4: no close in time [the scenario mpa-bad-key's steps]</failure>
  </testcase>
  <testcase classname="suites.test_close" name="test_plain">
    <failure message="AssertionError: 3 != 4">details</failure>
  </testcase>
</testsuite></testsuites>
"""


def _run(**kw: object) -> object:
    base: dict[str, object] = dict(
        failed=(), errored=(), tests=3, problem=None, boot_s=1.0, suites_s=2.0
    )
    return out.LabRun(**{**base, **kw})


def test_junit_outcomes_tell_verdicts_from_harness_errors(tmp_path: Path) -> None:
    junit = tmp_path / "junit.xml"
    junit.write_text(JUNIT)
    failed, errored, tests = out.junit_outcomes(junit, "suites/test_close.py")
    assert tests == 7
    assert dict(failed) == {
        "test_close.py::test_contract": "contract: disconnected-once, no-event-after-destroy",
        "test_close.py::test_wire": "wire: fin-after-close",
        "test_close.py::test_peer": "peer: expected close 'fin', the peer saw 'none'; "
        "expected cm events none in order, the DUT saw ['connect_request']",
        "test_close.py::test_plain": "AssertionError: 3 != 4",
    }
    # A stage that could not run (the capture) says nothing about the kernel: no kill.
    assert errored == ["test_close.py::test_not_captured", "test_close.py::test_setup_broke"]


@pytest.mark.parametrize(
    ("run", "expected"),
    [
        (_run(problem="`hil lab up` exited 1"), "LAB ERROR"),
        (_run(tests=0), "LAB ERROR"),
        (_run(failed=(("t::a", "contract: x"),), errored=("t::b",)), "KILLED"),
        (_run(errored=("t::b",)), "LAB ERROR"),
        (_run(), "SURVIVED"),
    ],
)
def test_verdict(run: object, expected: str) -> None:
    assert out.verdict(run)[0] == expected


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--mutant", "no-such-mutant"], "error: no mutant no-such-mutant"),
        (["--keep", "KEEP"], "is not empty: name a new directory"),
    ],
)
def test_bad_input_exits_2_with_a_message(tmp_path: Path, args: list[str], message: str) -> None:
    keep = tmp_path / "kept"
    (keep / "old").mkdir(parents=True)
    argv = [
        sys.executable,
        str(MUTANTS / "run.py"),
        *(str(keep) if a == "KEEP" else a for a in args),
    ]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2, done.stderr
    assert message in done.stderr
    assert "Traceback" not in done.stderr


def test_list_names_every_patch() -> None:
    done = subprocess.run(
        [sys.executable, str(MUTANTS / "run.py"), "--list"],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    names = {p.stem for p in MUTANTS.glob("*.patch")}
    listed = {line.split()[0] for line in done.stdout.splitlines() if not line.startswith(" ")}
    assert listed == names and len(names) >= 10
