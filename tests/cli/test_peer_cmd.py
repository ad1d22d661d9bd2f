"""``hil peer fuzz|replay``: bad input refused before any pair is held; the fuzz loop's
progress, findings, saved replays and exit codes with a fake DUT at the boundary."""

from __future__ import annotations

import io
import itertools
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from hil.cli import main
from hil.cli.peer_cmd import NO_RECOVERY, Cases, Crashes, fuzz_run
from hil.errors import EXIT_INFRA, EXIT_INPUT, EXIT_OK, EXIT_VIOLATION, HilError
from hil.host.liveness import Crash
from hil.peer.builtin import SCENARIOS
from hil.peer.fuzz import make_case
from hil.peer.scenario import Scenario, Send, load
from hil.report import results
from hil.report.categories import FUZZ_FINDING, write_categories
from hil.run.peercase import CaseCheck

EXAMPLE = Path(__file__).resolve().parents[2] / "inventory" / "example-lab.yaml"
KERNEL_LINE = "lab-0: WARNING: CPU: 0 PID: 7 at drivers/infiniband/sw/siw/siw_qp_rx.c:1"


def run(capsys: pytest.CaptureFixture[str], *argv: str | Path) -> tuple[int, str, str]:
    """``hil ARGV``: exit code (argparse's exit too), stdout, stderr."""
    try:
        code = main([*map(str, argv)])
    except SystemExit as e:  # argparse refused an argument
        code = int(e.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--seed", "-1", "--cases", "3"], "--seed: expected a whole number >= 0, got -1"),
        (["--seed", "1", "--cases", "0"], "--cases: expected a whole number >= 1, got 0"),
        (["--seed", "x", "--cases", "3"], "--seed: expected a whole number, got 'x'"),
        (
            ["--seed", "1", "--cases", "3", "--leak-scan-every", "0"],
            "--leak-scan-every: expected a whole number >= 1, got 0",
        ),
        (["--seed", "1"], "the following arguments are required: --cases"),
        (["--seed", "1", "--cases", "3", "--dut", "c"], "--dut: invalid choice: 'c'"),
        (["--seed", "1", "--cases", "3", "--first", "-2"], "--first: expected a whole number"),
        (
            ["--seed", "1", "--cases", "3", "--max-crashes", "x"],
            "--max-crashes: expected a whole number, got 'x'",
        ),
        (
            ["--seed", "1", "--cases", "3", "--recover-timeout", "-1"],
            "--recover-timeout: seconds out of range",
        ),
        (["--seed", "1", "--cases", "3", "--scenario", "nope"], "no peer scenario 'nope'"),
        (["--seed", "1", "--cases", "3", "--scenario", "gone.yaml"], "gone.yaml: cannot read"),
    ],
)
def test_bad_fuzz_input_is_refused_with_exit_1(
    capsys: pytest.CaptureFixture[str], args: list[str], said: str
) -> None:
    code, _, err = run(capsys, "peer", "fuzz", "lab-0-1", *args)
    assert code == EXIT_INPUT
    assert said in err
    assert "Traceback" not in err


def test_an_out_that_cannot_be_made_is_bad_input(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    (tmp_path / "file").write_text("")
    code, _, err = run(
        capsys, "peer", "fuzz", "p", "--seed", "1", "--cases", "1", "--out", tmp_path / "file/x"
    )
    assert (code, err.startswith("hil: error: --out ")) == (EXIT_INPUT, True)


def test_an_unknown_pair_is_bad_input(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = run(
        capsys,
        "--inventory",
        EXAMPLE,
        "--store",
        tmp_path / "store.db",
        "peer",
        "fuzz",
        "no-such-pair",
        "--seed",
        "1",
        "--cases",
        "1",
        "--out",
        tmp_path / "out",
    )
    assert code == EXIT_INPUT
    assert "no pair 'no-such-pair'" in err


def test_replay_of_a_bad_file_is_bad_input(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nrole: sideways\nexpectation: e\nsteps: [{step: sleep, seconds: 1}]\n")
    code, _, err = run(capsys, "peer", "replay", bad, "lab-0-1")
    assert code == EXIT_INPUT
    assert err.startswith(f"hil: error: {bad}: role:")


class FakeDut:
    """The DUT at the fuzz loop's boundary: a case with a truncated send leaks (when
    ``leaks``); the runs in ``crash_at`` crash the host, run ``interrupt_at`` meets Ctrl-C,
    and with ``error`` a case that does not leak could not run.  ``recover`` notes the
    scenarios whose crash it recovered from, and fails with ``recovery_fails``."""

    def __init__(
        self,
        leaks: bool = True,
        crash_at: tuple[int, ...] = (),
        interrupt_at: int = -1,
        error: bool = False,
        recovery_fails: bool = False,
        known: str = "",
    ) -> None:
        self.checks: dict[Scenario, CaseCheck] = {}
        self.runs = 0
        self.ran: list[str] = []  # each run's scenario
        self.recovered: list[tuple[str, int]] = []  # (host, the run it came after)
        self.leaks, self.crash_at, self.interrupt_at, self.error = (
            leaks,
            crash_at,
            interrupt_at,
            error,
        )
        self.recovery_fails = recovery_fails
        self.known = known  # what a crash is known as ('' a new finding)
        self.held: tuple[str, ...] = ()  # names ending so send a known crash's trigger
        self.told: tuple[str, ...] = ()  # each case's known reports, told apart

    def scan(self) -> str:
        return ""

    def not_run(self, scenario: Scenario) -> str:
        held = scenario.name.endswith(self.held)
        return "it sends mpa_reply pd_length 600, which stops 6.1.192: known" if held else ""

    def recover(self, crash: Crash, *, say: Callable[[str], None], timeout: float) -> None:
        if self.recovery_fails:
            raise HilError(f"{crash.host}: no SSH within {timeout:g}s")
        say(f"{crash.host}: power cycle")
        self.recovered.append((crash.host, self.runs))

    def check(self, scenario: Scenario, scan: bool = True) -> CaseCheck:
        self.runs += 1
        self.ran.append(scenario.name)
        if self.runs == self.interrupt_at:
            raise KeyboardInterrupt
        truncated = any(isinstance(s, Send) and s.truncate is not None for s in scenario.steps)
        crash = Crash("lab-0", "kernel_crash", "BUG: kernel NULL pointer dereference")
        crashed = self.runs in self.crash_at
        leaked = (truncated and self.leaks) or crashed
        reasons = ("resources-back-to-baseline: lab-0 qp: 0 -> 1",) if leaked else ()
        error = "RemoteError: agent gone" if self.error and not reasons else ""
        kernel = (KERNEL_LINE,) if reasons else ()
        checked = CaseCheck(
            scenario,
            reasons,
            kernel,
            error=error,
            crash=crash if crashed else None,
            known=self.known if crashed else "",
            known_reports=self.told,
        )
        self.checks[scenario] = checked
        return checked


def _fuzz(
    dut: FakeDut,
    out: Path,
    cases: int = 12,
    alluredir: Path | None = None,
    crashes: Crashes = NO_RECOVERY,
    leak_scan_every: int = 1,
    first: int = 0,
) -> tuple[int, str]:
    err = io.StringIO()
    ticks = itertools.count()
    code = fuzz_run(
        dut,
        list(SCENARIOS),
        Cases(1, cases, first),
        out,
        err,
        lambda: float(next(ticks)),
        alluredir,
        leak_scan_every,
        crashes,
    )
    return code, err.getvalue()


def test_findings_are_shrunk_saved_and_shown_as_they_come(tmp_path: Path) -> None:
    code, err = _fuzz(FakeDut(), tmp_path)
    lines = err.splitlines()
    progress = [ln for ln in lines if " cases/s, " in ln and "done" not in ln]
    findings = [ln for ln in lines if ln.startswith("hil: FINDING case ")]
    saved = sorted(tmp_path.glob("*.yaml"))
    assert code == EXIT_VIOLATION
    assert progress[0].startswith("hil: 1/12 cases, ") and progress[-1].startswith("hil: 12/12")
    assert findings and len(findings) == len(saved)
    # Each finding comes before the progress line of its case.
    first = lines.index(findings[0])
    assert lines[first + 1].endswith(f"{1} findings")
    assert "resources-back-to-baseline" in findings[0] and "shrunk to 1 sends" in findings[0]
    replay = load(saved[0])
    sends = [s for s in replay.steps if isinstance(s, Send)]
    assert len(sends) == 1 and sends[0].truncate is not None  # shrunk to the cause
    assert "fuzz case " in replay.description and KERNEL_LINE in replay.description
    assert lines[-1].startswith("hil: done: 12/12 cases, ") and str(saved[0]) in lines[-1]


def test_the_rate_is_cases_per_second_of_the_clock(tmp_path: Path) -> None:
    # The fake clock ticks a second per read: one read at the start, one per case.
    code, err = _fuzz(FakeDut(leaks=False), tmp_path, cases=4)
    assert "hil: 4/4 cases, 1.00 cases/s, 0 findings" in err
    assert code == EXIT_OK


def test_a_case_that_cannot_run_is_exit_3_without_findings(tmp_path: Path) -> None:
    code, err = _fuzz(FakeDut(leaks=False, error=True), tmp_path, cases=3)
    assert code == EXIT_INFRA
    assert err.count("could not run: RemoteError: agent gone") == 3
    assert not list(tmp_path.glob("*.yaml"))


def test_a_crash_is_saved_whole_and_ends_the_run_without_max_crashes(tmp_path: Path) -> None:
    dut = FakeDut(leaks=False, crash_at=(2,))
    code, err = _fuzz(dut, tmp_path)
    assert code == EXIT_VIOLATION
    assert dut.runs == 2 and not dut.recovered  # no shrinking, no more cases on a crashed pair
    assert "FINDING host crashed" in err
    assert "hil: stopped: lab-0 crashed; 0 crashes recovered already, --max-crashes 0" in err
    assert err.splitlines()[-1].startswith("hil: done: 1/12 cases, ")
    (saved,) = tmp_path.glob("*.yaml")
    assert "crashed a host; not shrunk" in load(saved).description


def test_a_crashed_host_is_recovered_and_the_run_goes_on_up_to_max_crashes(
    tmp_path: Path,
) -> None:
    dut = FakeDut(leaks=False, crash_at=(2, 4, 6))
    code, err = _fuzz(dut, tmp_path, cases=8, crashes=Crashes(2, 60))
    # Recovered after runs 2 and 4; the third crash is one too many.
    assert dut.recovered == [("lab-0", 2), ("lab-0", 4)] and dut.runs == 6
    assert code == EXIT_VIOLATION and len(list(tmp_path.glob("*.yaml"))) == 3
    assert err.count("FINDING host crashed") == 3 and "hil: lab-0: power cycle" in err
    assert "hil: lab-0 recovered and the pair set up again; the run goes on" in err
    assert "hil: 3/8 cases, 1.00 cases/s, 0 findings, 1 crashes recovered" in err
    assert "2 crashes recovered already, --max-crashes 2" in err


def test_a_crash_runs_its_batch_again_its_leaks_lost_in_the_reboot(tmp_path: Path) -> None:
    dut = FakeDut(leaks=False, crash_at=(3,))
    code, err = _fuzz(dut, tmp_path, cases=5, crashes=Crashes(1, 60), leak_scan_every=4)
    names = [n.rsplit("-", 1)[1] for n in dut.ran]
    # Case 2 crashed in the batch 0-3: cases 0 and 1 run again before case 3.
    assert names == ["0", "1", "2", "0", "1", "3", "4"], names
    assert err.splitlines()[-1].startswith("hil: done: 5/5 cases, ") and code == EXIT_VIOLATION


KNOWN = (
    "known kernel finding siw-p2p-bad-rtr-iwcm-bug on lab-0: kernel BUG at "
    "drivers/infiniband/core/iwcm.c:969! (docs/findings/siw-p2p-bad-rtr-iwcm-bug.md)"
)


def test_a_crash_a_known_finding_explains_is_saved_and_told_apart_not_a_finding(
    tmp_path: Path,
) -> None:
    dut = FakeDut(leaks=False, crash_at=(2,), known=KNOWN)
    alluredir = tmp_path / "results"
    code, err = _fuzz(dut, tmp_path, cases=4, crashes=Crashes(1, 60), alluredir=alluredir)
    assert code == EXIT_OK and "FINDING" not in err, err
    (saved,) = tmp_path.glob("*.yaml")
    assert f"hil: KNOWN host crashed: {saved.stem}: {KNOWN} -> {saved}" in err
    assert f"the crash is a {KNOWN}" in load(saved).description
    assert err.splitlines()[-1].endswith(f"findings saved: none; known crashes saved: {saved}")
    (result,) = results.read(alluredir)
    assert result.status == "skipped" and result.known_kernel == ("siw-p2p-bad-rtr-iwcm-bug",)


def test_a_known_kernel_report_is_shown_with_its_case_and_is_no_finding(tmp_path: Path) -> None:
    dut = FakeDut(leaks=False)
    dut.told = ("known kernel finding siw-rtr-sk-callback-lock on lab-0: WARNING: x (doc)",)
    code, err = _fuzz(dut, tmp_path, cases=1)
    assert code == EXIT_OK and "FINDING" not in err, err
    assert f"{dut.ran[0]}: {dut.told[0]}: told apart, no finding" in err


def test_a_case_that_sends_a_known_crash_trigger_is_not_run_and_says_why(tmp_path: Path) -> None:
    dut = FakeDut(leaks=False)
    dut.held = ("-fuzz-1-1",)
    code, err = _fuzz(dut, tmp_path, cases=3)
    assert code == EXIT_OK and dut.runs == 2
    name = make_case(list(SCENARIOS), 1, 1).scenario.name
    assert f"hil: case 1 ({name}) not run: it sends mpa_reply pd_length 600, which " in err
    assert err.splitlines()[-1].startswith(
        "hil: done: 3/3 cases, 1.00 cases/s, 0 findings, 1 not run (known crash triggers);"
    )


def test_a_host_that_is_not_recovered_ends_the_run(tmp_path: Path) -> None:
    dut = FakeDut(leaks=False, crash_at=(1,), recovery_fails=True)
    code, err = _fuzz(dut, tmp_path, crashes=Crashes(3, 60))
    assert code == EXIT_VIOLATION and dut.runs == 1
    assert "hil: stopped: lab-0 was not recovered: lab-0: no SSH within 60s" in err


@pytest.mark.parametrize("recovery_fails, most", [(True, 3), (False, 0)])
def test_a_run_that_stops_at_a_known_crash_is_not_clean(
    tmp_path: Path, recovery_fails: bool, most: int
) -> None:
    """A known crash is no finding, but the cases after it did not run: exit 3, not 0
    (a debug-lab run stopped so, exit 0, when a loaded machine kept the other guest's SSH
    from answering after the recovery, 2026-12-06)."""
    dut = FakeDut(leaks=False, crash_at=(1,), recovery_fails=recovery_fails, known=KNOWN)
    code, err = _fuzz(dut, tmp_path, crashes=Crashes(most, 60))
    assert code == EXIT_INFRA and dut.runs == 1, err
    assert "hil: stopped: lab-0" in err


def test_first_starts_at_that_case_of_the_seed(tmp_path: Path) -> None:
    dut = FakeDut(leaks=False)
    _fuzz(dut, tmp_path, cases=3, first=40)
    assert [n.rsplit("-", 1)[1] for n in dut.ran] == ["40", "41", "42"]
    assert dut.ran[0] == make_case(list(SCENARIOS), 1, 40).scenario.name


def test_ctrl_c_stops_the_loop_says_so_and_exits_3(tmp_path: Path) -> None:
    dut = FakeDut(leaks=False, interrupt_at=3)
    code, err = _fuzz(dut, tmp_path)
    assert (code, dut.runs) == (EXIT_INFRA, 3)
    assert "hil: interrupted (SIGINT); case " in err and "not judged, not a finding" in err
    assert "hil: restoring the pair and releasing its lease" in err
    assert err.splitlines()[-1].startswith("hil: done: 2/12 cases, ")


class SignalledDut(FakeDut):
    """Run ``at`` gets ``signum`` mid-case and loses the KeyboardInterrupt in its teardown
    (as an endpoint's close that timed out replaced it, debug lab 2026-12-05), then shows
    a leak: a check the interruption made, not the DUT.  With ``leaks`` every run leaks."""

    def __init__(self, at: int, signum: int, leaks: bool = False) -> None:
        super().__init__(leaks=leaks)
        self.at, self.signum = at, signum

    def check(self, scenario: Scenario, scan: bool = True) -> CaseCheck:
        if self.runs + 1 != self.at and not self.leaks:
            return super().check(scenario, scan)
        self.runs += 1
        try:
            if self.runs == self.at:
                os.kill(os.getpid(), self.signum)
                time.sleep(1)  # the handler runs here
        except KeyboardInterrupt:
            pass  # lost on the way out
        checked = CaseCheck(scenario, ("resources-back-to-baseline: lab-0 qp: 0 -> 1",))
        self.checks[scenario] = checked
        return checked


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_case_cut_short_by_a_signal_is_interrupted_never_a_finding(
    tmp_path: Path, signum: int
) -> None:
    before = signal.getsignal(signum)
    dut = SignalledDut(at=2, signum=signum)
    code, err = _fuzz(dut, tmp_path)
    assert (code, dut.runs) == (EXIT_INFRA, 2)  # no shrink runs, no more cases
    assert not list(tmp_path.glob("*.yaml")) and "FINDING" not in err
    assert f"hil: interrupted ({signal.Signals(signum).name}); case " in err
    assert signal.getsignal(signum) == before  # the run's handlers are put back


def test_a_finding_whose_shrinking_is_cut_short_is_kept_whole(tmp_path: Path) -> None:
    # Run 1 leaks; run 2, its re-run as the shrink begins, is signalled.
    dut = SignalledDut(at=2, signum=signal.SIGINT, leaks=True)
    code, err = _fuzz(dut, tmp_path, cases=1)
    (saved,) = tmp_path.glob("*.yaml")
    assert code == EXIT_VIOLATION and "not reproduced" in err
    assert "it failed once, so it is kept whole" in load(saved).description


def test_with_an_alluredir_each_finding_is_a_result_with_its_replay(tmp_path: Path) -> None:
    alluredir = tmp_path / "results"
    alluredir.mkdir()
    write_categories(alluredir)
    _fuzz(FakeDut(), tmp_path, alluredir=alluredir)
    found = results.read(alluredir)
    saved = sorted(tmp_path.glob("*.yaml"))
    assert found and len(found) == len(saved)
    assert {r.category for r in found} == {FUZZ_FINDING}
    assert {r.test for r in found} == {f"hil peer fuzz::{p.stem}" for p in saved}
    assert all("resources-back-to-baseline" in r.message for r in found)


def test_a_crash_is_a_result_too(tmp_path: Path) -> None:
    alluredir = tmp_path / "results"
    alluredir.mkdir()
    write_categories(alluredir)
    _fuzz(FakeDut(leaks=False, crash_at=(2,)), tmp_path, alluredir=alluredir)
    (found,) = results.read(alluredir)
    assert found.category == FUZZ_FINDING and "fuzz finding: host crashed: " in found.message


class LeakingOnceDut(FakeDut):
    """The DUT's kmemleak at the boundary: the first batch scan reports a leak that no case
    makes again alone."""

    def __init__(self) -> None:
        super().__init__(leaks=False)
        self.scanned: list[int] = []  # the run count at each scan

    def scan(self) -> str:
        self.scanned.append(self.runs)
        return (
            "unreferenced object 0xffff888004c2d000 (size 512):" if len(self.scanned) == 1 else ""
        )


def test_a_batch_leak_saves_each_case_of_the_batch(tmp_path: Path) -> None:
    dut = LeakingOnceDut()
    err = io.StringIO()
    ticks = itertools.count()
    code = fuzz_run(
        dut,
        list(SCENARIOS),
        Cases(1, 6),
        tmp_path,
        err,
        lambda: float(next(ticks)),
        leak_scan_every=3,
    )
    # Scans after cases 3 and 6; between them the first batch run again, a scan after each.
    assert dut.scanned == [3, 4, 5, 6, 9] and code == EXIT_VIOLATION
    saved = sorted(tmp_path.glob("*.yaml"))
    assert len(saved) == 3 and all(p.stem.split("-")[-1] in "012" for p in saved)
    text = load(saved[0]).description
    assert "none leaked run again alone" in text and "unreferenced object 0xffff" in text
    assert "cases 0, 1, 2 (a batch): unreferenced object" in err.getvalue()


class FailingOnceDut(FakeDut):
    """The first case fails once (a leaked QP) and passes when run again."""

    def check(self, scenario: Scenario, scan: bool = True) -> CaseCheck:
        self.runs += 1
        reasons = ("resources-back-to-baseline: lab-0 qp: 0 -> 1",) if self.runs == 1 else ()
        checked = CaseCheck(scenario, reasons)
        self.checks[scenario] = checked
        return checked


def test_a_finding_not_reproduced_keeps_the_reasons_of_the_run_that_failed(
    tmp_path: Path,
) -> None:
    code, err = _fuzz(FailingOnceDut(), tmp_path, cases=1)
    (saved,) = tmp_path.glob("*.yaml")
    assert code == EXIT_VIOLATION and "(no reason kept)" not in err
    assert "why it failed: resources-back-to-baseline" in load(saved).description
