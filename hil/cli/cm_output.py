"""What ``hil cm run`` prints: observers of its one test (:mod:`hil.run.observer`).

The text observer prints the timeline and each verdict as the test's stages
give them; the JSON observer gathers one object printed at the end:
``{"lease", "setup", "provider", "timeline", "verdict", "evidence", "wire",
"kmemleak", "outcome", "ok", "failures", "lab_errors"}`` (``kmemleak`` on a
kernel that runs it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hil.run.observer import Observer

if TYPE_CHECKING:
    from hil.judge.contract import Verdict
    from hil.judge.timeline import Timeline
    from hil.run.observer import EvidenceReport, KernelFindings, TestResult
    from hil.wire.judge import WireReport


class TextOutput(Observer):
    """Prints each stage's result as it comes (see the module doc)."""

    name = "text"

    def verdict(self, timeline: Timeline, verdict: Verdict) -> None:
        print_timeline(timeline)
        print(verdict.to_text())

    def kernel_findings(self, findings: KernelFindings) -> None:
        for host, report in findings.kmemleak.items():
            if report:
                print(f"kmemleak on {host}:\n{report}")

    def evidence(self, report: EvidenceReport) -> None:
        for note in report.notes:
            print(f"evidence: {note}")
        if report.check is not None:
            print(f"evidence: {report.check.to_text()}")

    def wire_verdict(self, report: WireReport) -> None:
        print(report.verdict.to_text())

    def test_finished(self, result: TestResult) -> None:
        for error in result.lab_errors:
            print(f"lab error: {error}")
        print(f"outcome: {result.outcome}" + ("" if result.ok else " (not ok)"))


class JsonOutput(Observer):
    """Gathers the run's verdicts into one JSON-ready object (``doc``)."""

    name = "json"

    def __init__(self) -> None:
        self.doc: dict[str, Any] = {}

    def verdict(self, timeline: Timeline, verdict: Verdict) -> None:
        self.doc["timeline"] = timeline.to_dict()
        self.doc["verdict"] = verdict.to_dict()

    def kernel_findings(self, findings: KernelFindings) -> None:
        self.doc["kmemleak"] = dict(findings.kmemleak)

    def evidence(self, report: EvidenceReport) -> None:
        check = report.check
        self.doc["evidence"] = {
            "ok": None if check is None else check.ok,
            "text": None if check is None else check.to_text(),
            "notes": list(report.notes),
        }

    def wire_verdict(self, report: WireReport) -> None:
        self.doc["wire"] = report.verdict.to_dict()

    def test_finished(self, result: TestResult) -> None:
        self.doc["outcome"] = result.outcome
        self.doc["ok"] = result.ok
        self.doc["failures"] = list(result.failures)
        self.doc["lab_errors"] = list(result.lab_errors)


def print_timeline(tl: Timeline) -> None:
    """The timeline as lines: clocks, events and actions on the controller's clock, metrics."""
    print(f"{tl.scenario} on pair ({tl.pair[0]}, {tl.pair[1]}), profile {tl.provider}")
    for o in tl.offsets:
        print(f"  clock {o.host}: offset {o.offset_us} us +/- {o.uncertainty_us} us")
    t0 = min((x.t_us for x in tl.merged()), default=0)
    for x in tl.merged():
        print(f"  {(x.t_us - t0) / 1000:10.3f} ms  {x.brief()}")
    for name, value in sorted(tl.metrics.items()):
        print(f"  metric {name} = {value:g}")
    for r in tl.resources:
        if r.after != r.before:
            print(f"  resources {r.host} {r.kind}: {r.before} before, {r.after} after")
