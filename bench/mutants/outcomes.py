"""What one lab's suite run says about a mutant: the JUnit outcomes and the verdict.

Kept apart from :mod:`run` (which builds, boots and runs) so the reading of
a run can be tested without a lab: tests/bench/test_mutants_outcomes.py.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

Verdict = Literal["KILLED", "SURVIVED", "LAB ERROR"]


@dataclass(frozen=True)
class LabRun:
    """What the suites gave on one lab: failed and errored test ids, tests run, a lab problem."""

    failed: tuple[tuple[str, str], ...]  # (test id, first line of its failure)
    errored: tuple[str, ...]
    tests: int
    problem: str | None
    boot_s: float
    suites_s: float


def verdict(run: LabRun) -> tuple[Verdict, str]:
    """KILLED by a failed test; LAB ERROR when the lab broke or nothing ran; else SURVIVED."""
    if run.problem:
        return "LAB ERROR", run.problem
    if run.tests == 0:
        return "LAB ERROR", "no test ran (check the Killed-by -k expressions)"
    if run.failed:
        return "KILLED", ", ".join(t for t, _ in run.failed)
    if run.errored:
        return "LAB ERROR", "tests errored in setup/teardown: " + ", ".join(run.errored)
    return "SURVIVED", f"{run.tests} tests passed"


def junit_outcomes(path: Path, suite: str) -> tuple[list[tuple[str, str]], list[str], int]:
    """Failed (id, reason) and errored ids, and the number of tests, from a JUnit report.

    A test fails in its call (an assertion, the contract) or in its teardown
    with a verdict (``pytest.fail`` of the test's TestRun: the wire judge, the
    after-test checks: "failed on teardown with "Failed: ..."): both kill.  A
    teardown that starts with a lab error (``Failed: hil: LabError: ...``: a
    stage could not run) and any other error (setup, a crash of the harness)
    say nothing about the kernel.
    """
    failed: dict[str, str] = {}
    errored: list[str] = []
    tests: set[str] = set()
    for case in ET.parse(path).getroot().iter("testcase"):
        test_id = f"{Path(suite).name}::{case.get('name')}"
        tests.add(test_id)  # a teardown error repeats the test case
        for bad in (e for e in case if e.tag in ("failure", "error")):
            message = f"{bad.get('message') or ''}\n{bad.text or ''}".strip()  # text: in full
            on_teardown = 'failed on teardown with "Failed: ' in message
            lab = 'failed on teardown with "Failed: hil: LabError: ' in message
            verdict_ = bad.tag == "failure" or (on_teardown and not lab)
            if verdict_ and test_id not in failed:
                failed[test_id] = _reason(message)
            elif not verdict_:
                errored.append(test_id)
    return list(failed.items()), errored, len(tests)


def _reason(message: str) -> str:
    """What a failure names: the broken contract or wire rules, else its first line."""
    first = message.removeprefix('failed on teardown with "').splitlines()[0]
    # "[rule] (invariant 7, profile siw) ...", "[rule] (profile siw) ...", "[rule] fail ..."
    rules = re.findall(
        r"^\s*\[([a-z0-9-]+)\] (?:fail|\((?:invariant \d+, )?profile)", message, re.M
    )
    judge = re.match(r"(?:Failed: )?(contract|wire) FAILED", first)
    if judge and rules:
        return f"{judge[1]}: {', '.join(dict.fromkeys(rules))}"
    peer = _peer_failures(message)
    return f"peer: {peer}" if peer else first[:160]


def _peer_failures(message: str) -> str:
    """A failed peer verdict's checks (hil/peer/judge.py ``to_text``: "  - WHAT [SOURCES]"
    under "peer scenario ... FAILED"), their sources left off; the scenario's own steps
    only when no check of the expectation failed.  Each check once: JUnit's message and
    text both hold them."""
    if not re.search(r"peer scenario \S+ against \S+: FAILED", message):
        return ""
    lines = re.findall(r"^E?\s*- (.+?) \[([^\]]*)\]$", message, re.M)
    checks = [what for what, src in lines if not src.startswith("the scenario ")]
    return "; ".join(dict.fromkeys(checks or [what for what, _ in lines]))
