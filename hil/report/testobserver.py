"""The Allure report as an observer of each test on the pair (:mod:`hil.run.observer`).

- ``test_started``: the ``kernel`` label (each release the pair's hosts run),
  so that a kernel matrix night shows which kernel each result ran on;
- ``evidence``: ``rdma resource`` counts before/after and the kernel log of
  both hosts (every test, passed or failed), what could not be taken as a
  note, and each known kernel finding of the test (attached, labelled
  ``known_kernel_finding``, linked to where it is filed);
- ``kernel_findings``: each host's kmemleak report;
- ``wire_verdict``: the wire verdict and the decoded exchange;
- ``test_finished``: each timeline's picture with the wire lane and the
  contract verdict the test's result holds; a crashed host's last kernel
  log lines; the captures (``--hil-pcap``) and the NIC and debugfs
  snapshots (``--hil-hw-evidence``) of a failed test, or of every test.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hil.report import attach
from hil.report.crash import attach_crash
from hil.report.observer import AllureObserver
from hil.report.results import KNOWN_KERNEL_LABEL

if TYPE_CHECKING:
    from hil.run.observer import EvidenceReport, KernelFindings, TestInfo, TestResult
    from hil.wire.judge import WireReport


class AllureTestObserver(AllureObserver):
    """Steps and attachments of CM runs (:class:`AllureObserver`) and of each test."""

    def __init__(self, pcap: str = "failed", hw: str = "failed") -> None:
        super().__init__()
        self.pcap = pcap  # failed, all or none
        self.hw = hw  # failed, all or off
        self._wire: WireReport | None = None
        self._evidence: EvidenceReport | None = None

    def test_started(self, info: TestInfo) -> None:
        self._wire = self._evidence = None
        for release in info.kernels:
            attach.label("kernel", release)
        for end, what in zip(("end_a", "end_b"), info.ends, strict=False):
            attach.label(end, what)

    def evidence(self, report: EvidenceReport) -> None:
        self._evidence = report
        for note in report.notes:
            attach.note("evidence note", note)
        check = report.check
        if check is None:
            return
        attach.attach_resource_counts(check.resources)
        for host, kinds in check.not_counted.items():
            attach.note(
                f"rdma resource types not counted on {host}",
                f"{', '.join(kinds)}: its `rdma resource show` summary does not list them "
                "(an older kernel); their leaks are not checked on this host",
            )
        dropped = [
            f"{host}: {n} kernel log records were overwritten before they were read"
            for host, n in check.lost.items()
            if n
        ]
        attach.attach_kernel_log([*check.kernel_log, *dropped])
        for match in check.known:
            head = f"{match.line()}\nstatus: {match.finding.status}\n\n"
            attach.note(
                f"known kernel finding {match.finding.id} on {match.report.host}",
                head + match.report.text(),
            )
            attach.label(KNOWN_KERNEL_LABEL, match.finding.id)
            attach.link(match.finding.upstream, f"known kernel finding {match.finding.id}")

    def kernel_findings(self, findings: KernelFindings) -> None:
        for host, report in findings.kmemleak.items():
            if report:
                attach.note(f"kmemleak report of {host}", report)

    def wire_verdict(self, report: WireReport) -> None:
        self._wire = report
        attach.attach_wire_verdict(report.verdict)
        if report.exchange is not None:
            attach.attach_exchange(report.exchange)

    def test_finished(self, result: TestResult) -> None:
        wire = self._wire
        # Drawn now: the result holds every timeline's contract verdict, those judged
        # after the wire stage too.
        if wire is not None and wire.exchange is not None:
            for tl in wire.timelines:
                verdict = result.verdict_of(tl)
                attach.attach_wire_timeline(tl, wire.exchange, wire.verdict, verdict)
        if result.crash is not None:
            attach_crash(result.crash)
        failed = not result.ok
        ev = self._evidence
        if wire is not None and (
            self.pcap == "all" or (self.pcap == "failed" and (failed or not wire.verdict.ok))
        ):
            for point, path in sorted(wire.pcaps.items()):
                attach.attach_pcap(path, name=f"{point}.pcap")
        if (
            ev is not None
            and ev.hw is not None
            and self.hw != "off"
            and (self.hw == "all" or failed)
        ):
            attach.attach_hw_evidence(ev.hw)
        self._wire = self._evidence = None
