"""Observers of the tests of a pair run: the run's events (:mod:`hil.cm.observer`) and each test's.

A :class:`hil.run.testrun.TestRun` tells every observer of its pair run, in this order::

    test_started(info)
      ... the CM events of the test's sequence runs (hil.cm.observer) ...
      kernel_findings(findings)   # kmemleak reports, known kernel findings (when any)
      evidence(report)            # resources and kernel log after the test, judged
      wire_verdict(report)        # the capture decoded and judged (when the link was captured)
    test_finished(result)         # every verdict and the outcome

The Allure report, ``hil cm run``'s text and JSON outputs and the plugin's
own bookkeeping are observers; a lab adds its own the same way (subclass
:class:`Observer`, override what you need; register it with
``PairRun(..., observers=[...])`` or pytest's ``pytest_hil_observers``).
An observer must not raise: a failing one is logged and the test goes on.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from hil.cm import observer as cm_observer

if TYPE_CHECKING:
    from hil.host.hwevidence import HwEvidence
    from hil.host.liveness import Crash
    from hil.judge.checks import CheckResult
    from hil.judge.contract import Verdict
    from hil.judge.timeline import Timeline
    from hil.wire.judge import WireReport

Outcome = Literal[
    "passed", "failed", "skipped", "error", "host crashed", "interrupted", "timed out"
]


@dataclass(frozen=True)
class TestInfo:
    """One test on the pair as observers see it when it starts."""

    __test__ = False  # not a test class, for pytest's collection

    name: str  # the pytest node id, or "hil cm run SEQUENCE"
    pair: str
    hosts: tuple[str, str]
    provider: str  # the driver the pair really runs
    kernels: tuple[str, ...]  # uname -r of the pair's hosts
    pinned: dict[str, dict[str, str]] = field(default_factory=dict)  # host -> param -> value
    # What each end runs, A first: "lab-0: siw, kernel 6.1.192, profile siw" (a mixed
    # pair's two ends differ in one of them).
    ends: tuple[str, ...] = ()


@dataclass(frozen=True)
class EvidenceReport:
    """What the after-test checks read and judged; ``notes`` say what could not be taken."""

    check: CheckResult | None  # None: not taken (the reason is in notes)
    hw: HwEvidence | None = None  # NIC counters and debugfs before/after (when snapshots are on)
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class KernelFindings:
    """Kernel reports found after a test: kmemleak's, per host ('' when none)."""

    kmemleak: dict[str, str] = field(default_factory=dict)

    def any(self) -> bool:
        """True when some host reported a leak."""
        return any(self.kmemleak.values())


@dataclass(frozen=True)
class TestResult:
    """Every verdict of one test and its outcome (see :class:`hil.run.testrun.TestRun`)."""

    __test__ = False

    name: str
    outcome: Outcome
    contract: tuple[tuple[Timeline, Verdict], ...]
    wire: WireReport | None
    evidence: EvidenceReport | None
    kernel: KernelFindings | None
    failures: tuple[str, ...]  # one text per failed verdict or lab error, in stage order
    lab_errors: tuple[str, ...]  # stages that could not run (a subset of failures)
    crash: Crash | None = None
    # Seconds per stage (hil.run.testrun: "before", "test", "after" and the stages in them;
    # stages at once overlap); "test" is the test itself.
    stages: dict[str, float] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """True when the test passed (or was skipped) and every verdict held."""
        return self.outcome in ("passed", "skipped") and not self.failures

    def verdict_of(self, timeline: Timeline) -> Verdict | None:
        """The contract verdict of one of the test's timelines, if it was judged."""
        return verdict_of(self.contract, timeline)


def verdict_of(verdicts: Iterable[tuple[Timeline, Verdict]], timeline: Timeline) -> Verdict | None:
    """The verdict of ``timeline`` among ``verdicts``, or None."""
    # Equal, not the same object: a recording tells one copy of its timeline and
    # returns another.
    return next((v for t, v in verdicts if t == timeline), None)


class Observer(cm_observer.Observer):
    """Base class of observers of pair runs and their tests: every method is a no-op."""

    def test_started(self, info: TestInfo) -> None:
        """A test on the set-up pair begins (before its capture and baseline)."""

    def kernel_findings(self, findings: KernelFindings) -> None:
        """kmemleak reported leaks after the test."""

    def evidence(self, report: EvidenceReport) -> None:
        """The after-test checks' evidence and verdict (resources, kernel log)."""

    def wire_verdict(self, report: WireReport) -> None:
        """The test's capture, decoded and judged; its files are kept until test_finished."""

    def test_finished(self, result: TestResult) -> None:
        """The test is over: every verdict and its outcome."""


class Observers(cm_observer.Observers, Observer):
    """Several observers as one (a failing one is logged); CM-only observers are welcome."""

    def test_started(self, info: TestInfo) -> None:
        self._each("test_started", info)

    def kernel_findings(self, findings: KernelFindings) -> None:
        self._each("kernel_findings", findings)

    def evidence(self, report: EvidenceReport) -> None:
        self._each("evidence", report)

    def wire_verdict(self, report: WireReport) -> None:
        self._each("wire_verdict", report)

    def test_finished(self, result: TestResult) -> None:
        self._each("test_finished", result)
