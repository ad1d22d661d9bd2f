"""hil.run.peercase: what makes a fuzz case fail, from its test's result (built by hand here;
running a case on the lab's pair is ``hil peer fuzz``'s lab run, docs/peer.md#fuzzing)."""

from __future__ import annotations

from pathlib import Path

from hil.host.liveness import Crash
from hil.judge import checks, known
from hil.judge.profiles import SIW
from hil.judge.timeline import KernelLogLine, ResourceCount
from hil.peer.builtin import SCENARIOS
from hil.peer.judge import Observed
from hil.run.observer import EvidenceReport, KernelFindings, Outcome, TestResult
from hil.run.peercase import crash_known, judged, unsent_private_data

SCENARIO = SCENARIOS["send-bad-crc"]
WARNING = "WARNING: CPU: 1 PID: 80 at drivers/infiniband/sw/siw/siw_cm.c:1420 siw_cm_work"


def _result(
    log: tuple[str, ...] = (),
    qp: tuple[int, int] = (0, 0),
    kmemleak: str = "",
    crash: Crash | None = None,
    lab_errors: tuple[str, ...] = (),
) -> TestResult:
    """The test of one case: host ha's kernel log ``log`` and its qp count before/after."""
    after = checks.AfterState(
        (ResourceCount("ha", "qp", *qp),), tuple(KernelLogLine("ha", m) for m in log), {}, 1.0
    )
    evidence = EvidenceReport(checks.assess(after, SIW, ("ha", "hb")))
    kernel = KernelFindings({"ha": kmemleak})
    outcome: Outcome = "host crashed" if crash else "passed"
    return TestResult("case", outcome, (), None, evidence, kernel, (), lab_errors, crash)


def test_a_clean_dut_passes_whatever_the_peer_saw() -> None:
    checked = judged(SCENARIO, _result(log=("siw: device registered",)), [], None, "")
    assert not checked.failed and not checked.error
    assert checked.kernel == ("ha: siw: device registered",)


def test_a_kernel_warning_fails_the_case_and_its_line_is_kept() -> None:
    checked = judged(SCENARIO, _result(log=(WARNING,)), [], None, "")
    assert checked.failed
    assert "kernel-log-clean" in checked.reasons[0]
    assert checked.kernel == (f"ha: {WARNING}",)


def test_a_leak_fails_the_case() -> None:
    checked = judged(SCENARIO, _result(qp=(0, 1)), [], None, "")
    assert checked.failed and "ha qp: 0 -> 1   <-- leaked" in checked.reasons[0]


def test_a_kmemleak_report_fails_the_case() -> None:
    checked = judged(SCENARIO, _result(kmemleak="unreferenced object 0x1"), [], None, "")
    assert checked.reasons == ("kmemleak on ha:\nunreferenced object 0x1",)


def test_a_failed_normal_connect_fails_the_case() -> None:
    why = "a normal connect to the DUT afterwards failed: no ESTABLISHED"
    assert judged(SCENARIO, _result(), [why], None, "").reasons == (why,)


def test_a_crash_fails_the_case_with_its_lines() -> None:
    crash = Crash("ha", "kernel_crash", "Oops", ("BUG: kernel NULL pointer dereference",))
    checked = judged(SCENARIO, _result(crash=crash), [], None, "RemoteError: gone")
    assert checked.failed and checked.crashed and not checked.error
    assert checked.kernel[-1] == "ha: BUG: kernel NULL pointer dereference"


def test_a_case_that_could_not_run_is_an_error_not_a_finding() -> None:
    checked = judged(SCENARIO, _result(lab_errors=("evidence not taken",)), [], None, "")
    assert (checked.failed, checked.error) == (False, "evidence not taken")


def test_a_known_report_in_a_cases_log_is_told_apart_and_no_finding() -> None:
    data = Path(__file__).resolve().parents[1] / "data" / "kernel"
    root = data.parents[2]
    findings = known.load(root / "suites" / "known-kernel-findings.yaml", root)
    log = tuple(
        line.split(": ", 1)[1]
        for line in (data / "siw-rtr-lockdep-6.1.192.txt").read_text().splitlines()
    )
    after = checks.AfterState((), tuple(KernelLogLine("ha", m) for m in log), {}, 1.0)
    scope = checks.Known(findings, "hil peer case", ("6.1.192",), anywhere=True)
    evidence = EvidenceReport(checks.assess(after, SIW, ("ha", "hb"), known=scope))
    result = TestResult("case", "passed", (), None, evidence, KernelFindings({}), (), (), None)
    checked = judged(SCENARIO, result, [], None, "")
    assert not checked.failed
    assert checked.known_reports == (
        "known kernel finding siw-rtr-sk-callback-lock on ha: WARNING: inconsistent lock "
        "state (docs/findings/siw-terminate-sk-callback-lock.md)",
    )
    plain = EvidenceReport(checks.assess(after, SIW, ("ha", "hb")))
    bare = TestResult("case", "passed", (), None, plain, KernelFindings({}), (), (), None)
    assert judged(SCENARIO, bare, [], None, "").failed


def test_a_crash_off_a_console_is_known_by_its_report_once_the_printk_times_go() -> None:
    data = Path(__file__).resolve().parents[1] / "data" / "kernel"
    report = (data / "siw-mpa-reply-pd0-oops-6.1.192.txt").read_text().splitlines()
    console = tuple(f"[   43.{i:06}] {line.split(': ', 1)[1]}" for i, line in enumerate(report))
    crash = Crash("ha", "kernel_crash", console[0], console, "console lab-0.log")
    root = data.parents[2]
    findings = known.load(root / "suites" / "known-kernel-findings.yaml", root)
    assert crash_known(crash, findings, ("6.1.192",)).startswith(
        "known kernel finding siw-mpa-reply-enhanced-pd0-null-deref on ha: BUG: kernel NULL"
    )
    assert crash_known(crash, findings, ("6.13.2",)) == ""


def test_private_data_the_peer_never_sent_is_a_finding_unless_the_provider_is_known_for_it() -> (
    None
):
    reply = {"dir": "tx", "frame": "mpa_reply", "fields": {"private_data": "6869"}}
    seen = Observed(
        (reply,),
        ("rejected", "connect_error"),
        private_data=(("rejected", "68690000ffff"), ("connect_error", "beef")),
    )
    leaked, told = unsent_private_data(seen, "siw")
    assert leaked == [
        "the DUT's application got private data the peer never sent: "
        "connect_error: 2 bytes, the peer sent 2"
    ]
    (line,) = told
    assert line.startswith("rejected: 6 bytes, the peer sent 2: known finding siw-mpa-reply")
    assert unsent_private_data(seen, "iw_cxgb4")[1] == []  # no provider-wide known there
    prefix = Observed((reply,), ("established",), private_data=(("established", "68"),))
    assert unsent_private_data(prefix, "siw") == ([], [])
