"""``hil peer fuzz|replay``: fuzz a DUT's iWARP protocol handling with the reference peer.

``hil peer fuzz PAIR --seed N --cases M`` reserves the pair, sets it up once (as
``hil cm run`` does: :class:`hil.run.PairRun`), then runs cases K .. K+M-1 of seed N
(``--first K``, default 0)
(:func:`hil.peer.fuzz.make_case`: mutations of the scenarios given by
``--scenario``, by default every built-in one) with the DUT on side ``--dut`` and
the peer on the other host, or the one the link's ``peer:`` names (a host outside
the pair is refused for now: hil.peer.run.peer_of).  Each case runs as a test
(:mod:`hil.run.peercase`): it FAILS when the DUT's kernel log shows a bad line
(WARNING, oops, KASAN, kmemleak), a resource leaked, a host crashed, or a normal connect to the DUT
afterwards fails; never merely because the DUT answered the mutated frames
differently from the base scenario's expectation (fuzzed frames have none).  A
failing case is shrunk to the fewest sends and overrides that still fail (each
try run on the DUT again) and saved in --out as a scenario file that replays it,
its description naming the case, its mutations, why it failed and the kernel log
lines.  kmemleak is scanned on the DUT once per --leak-scan-every cases (after a failing
case and the last too); a batch whose scan reports a leak is run again a case at a time,
a scan after each, to name the case (hil.peer.fuzz).  With --alluredir each finding is
also an Allure result there (category
"Fuzz findings", the replay file and the kernel log attached: hil.report.fuzz); the
nightly's fuzz run writes them beside the suites' results.  Progress goes to
stderr: cases done, cases/s, findings, each finding as it comes.  A case that
crashes a host is saved whole; the host is recovered (power cycle, journal, health
check, the pair set up again) and the run goes on, up to --max-crashes times.  Ctrl-C, SIGTERM
or the nightly's deadline (its SIGINT) stops the case that runs (its teardown runs),
which is reported as interrupted and never judged or saved as a finding; the pair
is restored and the lease released.  Exit 0: no
finding; 4: findings; 3: a case could not run (or interrupted) and no finding; 1:
bad input.

``hil peer replay FILE PAIR`` runs one scenario file (a saved finding) the same
way and prints the peer's verdict (shown, not judged) and the DUT's.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TextIO

from hil.cli.interrupts import Interrupts
from hil.cli.options import command_group, timeout_options, wait_option
from hil.errors import EXIT_INFRA, EXIT_OK, EXIT_VIOLATION, InputError
from hil.host.recovery import RECOVERY_TIMEOUT
from hil.timeouts import seconds

if TYPE_CHECKING:
    from collections.abc import Iterator

    from hil.host.liveness import Crash
    from hil.judge.known import KnownFinding
    from hil.peer.fuzz import Case, Finding, Progress
    from hil.peer.scenario import Scenario
    from hil.run.pairrun import PairRun
    from hil.run.peercase import CaseCheck, DutCheck

OUT = "reports/fuzz"
# A kmemleak scan took 30-55 s on the debug lab against a case's few seconds
# (docs/peer-fuzz.md, "The debug lab"): one scan per 10 cases makes its share a case a
# tenth, while a batch that leaks costs at most 10 reruns, each with its scan, to name
# the case (hil.peer.fuzz, module doc).
LEAK_SCAN_EVERY = 10
DEFAULT_FINDINGS = Path("suites") / "known-kernel-findings.yaml"  # as the plugin's, under cwd
# A recovery took 33 s on the plain lab and a debug guest boots in 70-130 s
# (docs/peer-fuzz.md); five of them keep a run's time on cases, not on reboots, when a
# known crash keeps coming back.
MAX_CRASHES = 5


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add ``hil peer`` and its subcommands."""
    cmds = command_group(subparsers, "peer", "fuzz a DUT with the reference peer", __doc__)
    p = cmds.add_parser(
        "fuzz",
        help="mutated peer scenarios against the DUT; failing cases shrunk and saved",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("pair", metavar="PAIR", help="the pair (a link name of the inventory)")
    p.add_argument("--seed", type=_whole(0), required=True, metavar="N", help="the cases' seed")
    p.add_argument("--cases", type=_whole(1), required=True, metavar="M", help="how many cases")
    p.add_argument(
        "--first",
        type=_whole(0),
        default=0,
        metavar="K",
        help="the first case's number (default 0): cases K .. K+M-1 of the seed, so that a "
        "long run can go on in a later hold",
    )
    p.add_argument(
        "--max-crashes",
        type=_whole(0),
        default=MAX_CRASHES,
        metavar="C",
        help="recover a host a case crashed and go on, up to C times; the next crash ends "
        f"the run (default {MAX_CRASHES}; 0: the first crash ends it)",
    )
    p.add_argument(
        "--recover-timeout",
        type=seconds,
        default=RECOVERY_TIMEOUT,
        metavar="S",
        help=f"bound of one host's recovery (default {RECOVERY_TIMEOUT:g})",
    )
    p.add_argument(
        "--scenario",
        action="append",
        default=[],
        metavar="S",
        help="a scenario to mutate: a built-in name or a scenario YAML file "
        "(repeatable; default: every built-in scenario)",
    )
    _dut_option(p)
    p.add_argument(
        "--out", default=OUT, metavar="DIR", help=f"where findings are saved (default {OUT})"
    )
    p.add_argument(
        "--alluredir",
        metavar="DIR",
        help="also write each finding as an Allure result into DIR (category Fuzz findings)",
    )
    p.add_argument(
        "--leak-scan-every",
        type=_whole(1),
        default=LEAK_SCAN_EVERY,
        metavar="K",
        help="scan kmemleak on the DUT once per K cases (and after a failing case and the "
        "last); a batch that leaks is run again a case at a time to name the case "
        f"(default {LEAK_SCAN_EVERY}; 1: after every case; docs/peer-fuzz.md)",
    )
    wait_option(p)
    timeout_options(p)
    p.set_defaults(func=_fuzz)

    p = cmds.add_parser("replay", help="run one scenario file on the DUT; print the verdicts")
    p.add_argument("file", metavar="FILE", help="a scenario YAML file (a saved finding)")
    p.add_argument("pair", metavar="PAIR", help="the pair (a link name of the inventory)")
    _dut_option(p)
    wait_option(p)
    timeout_options(p)
    p.set_defaults(func=_replay)


def _dut_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--dut",
        choices=("a", "b"),
        default="a",
        help="the pair's side that is the DUT; the peer runs on the other, or where the "
        "link's peer: says (default a)",
    )
    p.add_argument(
        "--known-kernel-findings",
        metavar="FILE",
        help="known kernel findings: a kernel report an entry explains on the DUT's kernel "
        "(a crash: a 'crashes: true' entry) is told as that finding, not a new one "
        f"(default {DEFAULT_FINDINGS}, when it exists)",
    )


def _whole(low: int) -> Callable[[str], int]:
    """An argparse type: a whole number >= ``low``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"expected a whole number >= {low}, got {value}")
        return value

    return parse


def scenarios_named(names: Sequence[str]) -> list[Scenario]:
    """Each ``--scenario``: a file when one is there (or the name ends in .yaml/.yml),
    else a built-in name; every built-in one when none is given.  InputError otherwise."""
    from hil.peer.builtin import SCENARIOS
    from hil.peer.scenario import load

    if not names:
        return [s for _, s in SCENARIOS.items()]
    return [
        load(n) if Path(n).exists() or n.endswith((".yaml", ".yml")) else SCENARIOS[n]
        for n in names
    ]


def out_dir(text: str, option: str = "--out") -> Path:
    """``option``'s directory, made if missing; InputError when it cannot be."""
    path = Path(text)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise InputError(f"{option} {text}: cannot make the directory: {e.strerror or e}") from None
    return path


@contextmanager
def _pair_run(args: argparse.Namespace, holder: str) -> Iterator[PairRun]:
    """The pair reserved and set up as ``hil cm run`` sets it up; restored and released."""
    from hil.inventory import load_from_args
    from hil.reservation import open_store
    from hil.run import PairRequest, PairRun
    from hil.timeouts import configured

    inv = load_from_args(args.inventory)
    request = PairRequest(pair=args.pair, holder=holder, wait=args.wait)
    # A debug lab's cold agent needs more than the default agent call bound
    # (ci/nightly passes --hil-timeout-agent 120 to its suites, and the pipeline this).
    bounds = configured(agent_call_s=args.timeout_agent, step_slack_s=args.timeout_step_slack)
    with bounds, open_store(args.store) as store:
        with PairRun(inv, store, request, progress=_say) as run:
            yield run


def _dut_check(run: PairRun, args: argparse.Namespace) -> DutCheck:
    from hil.host.liveness import DEFAULT_BOUND
    from hil.run.peercase import DutCheck
    from hil.run.testparts import TestOptions

    # No capture: the peer's connection is left out of the wire judge (hil/peer/run.py),
    # and a capture per case would cost more than the case.  The crash watch on: a DUT
    # crash is the finding that matters most.
    options = TestOptions(wire=False, liveness_s=DEFAULT_BOUND)
    return DutCheck(run, args.dut, options, known=known_findings(args.known_kernel_findings))


def known_findings(given: str | None) -> tuple[KnownFinding, ...]:
    """The known kernel findings of ``--known-kernel-findings`` (default: the suites' list
    under the working directory, when there is one); InputError when the file is bad."""
    from hil.judge import known

    path = Path(given) if given else DEFAULT_FINDINGS
    if not given and not path.is_file():
        return ()
    return known.load(path, Path.cwd())


def _fuzz(args: argparse.Namespace) -> int:
    scenarios = scenarios_named(args.scenario)
    out = out_dir(args.out)
    holder = f"hil peer fuzz --seed {args.seed}"
    alluredir = out_dir(args.alluredir, "--alluredir") if args.alluredir else None
    with _pair_run(args, holder) as run:
        dut = _dut_check(run, args)
        try:
            return fuzz_run(
                dut,
                scenarios,
                Cases(args.seed, args.cases, args.first),
                out,
                alluredir=alluredir,
                leak_scan_every=args.leak_scan_every,
                crashes=Crashes(args.max_crashes, args.recover_timeout),
            )
        finally:
            dut.close()


def _replay(args: argparse.Namespace) -> int:
    from hil.peer.scenario import load

    scenario = load(args.file)
    with _pair_run(args, f"hil peer replay {scenario.name}") as run:
        dut = _dut_check(run, args)
        try:
            checked = dut.check(scenario)
        finally:
            dut.close()
    if checked.peer is not None:
        print(f"peer (shown, not judged):\n{checked.peer.to_text()}")
    print(f"DUT: {_dut_text(checked)}")
    if checked.failed:
        return EXIT_VIOLATION
    return EXIT_INFRA if checked.error else EXIT_OK


class CaseChecker(Protocol):
    """What the fuzz loop needs of the DUT (:class:`hil.run.peercase.DutCheck` is one)."""

    def check(self, scenario: Scenario, scan: bool = True) -> CaseCheck: ...

    def scan(self) -> str: ...

    def recover(self, crash: Crash, *, say: Callable[[str], None], timeout: float) -> None: ...

    def not_run(self, scenario: Scenario) -> str: ...

    @property
    def checks(self) -> dict[Scenario, CaseCheck]: ...


@dataclass(frozen=True)
class Cases:
    """Which cases a run makes: ``first`` .. ``first + count - 1`` of ``seed``."""

    seed: int
    count: int
    first: int = 0


@dataclass(frozen=True)
class Crashes:
    """How many crashed hosts a run recovers and goes on after, each within ``timeout_s``."""

    most: int = 0
    timeout_s: float = RECOVERY_TIMEOUT


NO_RECOVERY = Crashes()  # the first crash ends the run


def fuzz_run(
    dut: CaseChecker,
    scenarios: Sequence[Scenario],
    cases: Cases,
    out: Path,
    err: TextIO = sys.stderr,
    clock: Callable[[], float] = time.monotonic,
    alluredir: Path | None = None,
    leak_scan_every: int = 1,
    crashes: Crashes = NO_RECOVERY,
) -> int:
    """``cases`` on ``dut``, kmemleak scanned once per ``leak_scan_every`` of them, a
    crashed host recovered as ``crashes`` allows; findings saved in ``out`` (and as Allure
    results in ``alluredir``, when given); progress and findings on ``err``; the exit code
    (see the module doc)."""
    from hil.errors import HilError
    from hil.peer.fuzz import Crashed, Interrupted, LeakScans, fuzz

    class _Crashed(Crashed):
        def __init__(self, checked: CaseCheck) -> None:
            super().__init__(checked.scenario)
            self.checked = checked

    errors: list[str] = []
    found: list[str] = []
    last: list[Progress] = []
    stop = Interrupts()  # inside main's: it tells a case cut short
    failing: dict[Scenario, CaseCheck] = {}  # each scenario's last failing check

    def fails(scenario: Scenario, scan: bool = True) -> bool:
        try:
            checked = dut.check(scenario, scan)
        except KeyboardInterrupt:
            raise Interrupted(scenario.name) from None
        if stop.why:
            # The signal came while the case ran; its KeyboardInterrupt may have been lost
            # on the way (an endpoint's close failing after it): its check is no finding.
            raise Interrupted(scenario.name)
        if checked.failed:
            # A rerun that passes (a shrink's first, not reproduced) must not take the
            # reasons of the run that failed: the finding is saved with those.
            failing[scenario] = checked
        if checked.crashed:
            raise _Crashed(checked)
        for line in checked.known_reports:
            print(f"hil: {scenario.name}: {line}: told apart, no finding", file=err)
        if checked.error and not checked.failed:
            errors.append(checked.error)
            print(f"hil: {scenario.name}: could not run: {checked.error}", file=err)
        return checked.failed

    def scan() -> str:
        try:
            return dut.scan()
        except HilError as e:
            errors.append(str(e))
            print(f"hil: the batch's kmemleak scan failed: {e}", file=err)
            return ""

    def on_finding(finding: Finding) -> None:
        if finding.batch:
            found.extend(str(p) for p in _batch_found(finding, out, err, alluredir))
            return
        checks = {**dut.checks, **failing}
        saved = save_finding(finding, checks, out)
        found.append(str(saved))
        line = finding_line(finding, checks)
        print(f"hil: FINDING {line} -> {saved}", file=err)
        checked = checks.get(finding.shrunk.scenario) or checks.get(finding.case.scenario)
        _report(alluredir, finding.shrunk.scenario.name, line, saved, checked)

    def on_progress(progress: Progress) -> None:
        last[:] = [progress]
        print(f"hil: {progress}", file=err, flush=True)

    def not_run(case: Case) -> bool:
        why = dut.not_run(case.scenario)
        if why:
            print(f"hil: case {case.number} ({case.scenario.name}) not run: {why}", file=err)
        return bool(why)

    recovered: list[str] = []
    known: list[str] = []  # crashes a known kernel finding explains: saved, not findings

    def recover(crash: Crashed) -> bool:
        assert isinstance(crash, _Crashed)
        saved = str(_crash_found(crash.checked, cases.seed, out, err, alluredir))
        (known if crash.checked.known else found).append(saved)
        if _recovered(dut, crash.checked, crashes, recovered, err):
            return True
        # The rest of the cases did not run: with no finding, that is no clean pass.
        errors.append(f"the run stopped at case {crash.checked.scenario.name}")
        return False

    try:
        with stop:
            fuzz(
                scenarios,
                fails,
                seed=cases.seed,
                cases=cases.count,
                first=cases.first,
                scans=LeakScans(leak_scan_every, lambda s: fails(s, False), scan)
                if leak_scan_every > 1
                else None,
                recover=recover,
                not_run=not_run,
                on_progress=on_progress,
                on_finding=on_finding,
                clock=clock,
            )
    except Crashed:
        pass  # saved and told by ``recover``, which ended the run
    except (KeyboardInterrupt, Interrupted) as e:
        cut = f"; case {e} was cut short: not judged, not a finding" if str(e) else ""
        print(f"hil: interrupted ({stop.why or 'SIGINT'}){cut}", file=err)
        print("hil: restoring the pair and releasing its lease", file=err)
        errors.append("interrupted")
    done = last[0] if last else None
    saved = ", ".join(found) or "none"
    also = f"; known crashes saved: {', '.join(known)}" if known else ""
    print(f"hil: done: {done or '0 cases'}; findings saved: {saved}{also}", file=err)
    if found:
        return EXIT_VIOLATION
    return EXIT_INFRA if errors else EXIT_OK


def _recovered(
    dut: CaseChecker, checked: CaseCheck, crashes: Crashes, before: list[str], err: TextIO
) -> bool:
    """The host ``checked`` crashed recovered, when ``crashes`` allows one more; whether
    the run goes on.  ``before`` holds the hosts recovered so far (this one added)."""
    from hil.errors import HilError

    crash = checked.crash
    assert crash is not None
    host = crash.host
    if len(before) >= crashes.most:
        print(
            f"hil: stopped: {host} crashed; {len(before)} crashes recovered already, "
            f"--max-crashes {crashes.most} (recover it: hil host recover {host})",
            file=err,
        )
        return False
    print(f"hil: {host} crashed under {checked.scenario.name}: recovering it", file=err)
    try:
        dut.recover(crash, say=lambda t: print(f"hil: {t}", file=err), timeout=crashes.timeout_s)
    except HilError as e:
        print(f"hil: stopped: {host} was not recovered: {e}", file=err)
        return False
    before.append(host)
    print(f"hil: {host} recovered and the pair set up again; the run goes on", file=err)
    return True


def _crash_found(
    checked: CaseCheck, seed: int, out: Path, err: TextIO, alluredir: Path | None
) -> Path:
    """A case that crashed a host: saved, shown, reported (as a known kernel finding when
    one explains it); the replay file's path."""
    saved = save_crash(checked, seed, out)
    line = f"host crashed: {checked.scenario.name}"
    if not checked.known:
        print(f"hil: FINDING {line} -> {saved}", file=err)
        _report(alluredir, checked.scenario.name, line, saved, checked)
        return saved
    print(f"hil: KNOWN {line}: {checked.known} -> {saved}", file=err)
    if alluredir is not None:
        from hil.report.fuzz import write_known

        write_known(alluredir, checked.scenario.name, checked.known, saved, checked.kernel)
    return saved


def _batch_found(finding: Finding, out: Path, err: TextIO, alluredir: Path | None) -> list[Path]:
    """A batch whose leak no case of it made alone: each case saved whole, the batch shown
    and reported once; the replay files' paths."""
    from hil.run.peercase import CaseCheck

    numbers = ", ".join(str(c.number) for c in finding.batch)
    why = f"{finding.leak}\n(kmemleak's scan after the batch of cases {numbers})"
    saved = []
    for case in finding.batch:
        head = [
            f"fuzz case {case.number} of seed {case.seed}, from scenario {case.base}",
            *(f"mutation: {m}" for m in case.mutations),
            f"one of the cases {numbers}, after which kmemleak's scan found a leak; "
            "none leaked run again alone, so each is kept whole",
        ]
        saved.append(_save(case.scenario, head, CaseCheck(case.scenario, (why,)), out))
    line = f"cases {numbers} (a batch): {finding.leak.splitlines()[0]}; not reproduced alone"
    print(f"hil: FINDING {line} -> {', '.join(map(str, saved))}", file=err)
    _report(
        alluredir,
        finding.case.scenario.name,
        line,
        saved[-1],
        CaseCheck(finding.case.scenario, (why,)),
    )
    return saved


def _report(
    alluredir: Path | None, name: str, line: str, saved: Path, checked: CaseCheck | None
) -> None:
    """The finding as an Allure result in ``alluredir`` (none: not asked for)."""
    if alluredir is None:
        return
    from hil.report.fuzz import write_finding

    kernel, reasons = (checked.kernel, checked.reasons) if checked else ((), ())
    write_finding(alluredir, name, line, saved, kernel, reasons)


def finding_line(finding: Finding, checks: dict[Scenario, CaseCheck]) -> str:
    """One line: the case, its shrink, and the first line of why it failed."""
    case, shrunk = finding.case, finding.shrunk
    why = _why(checks.get(shrunk.scenario) or checks.get(case.scenario))
    from hil.peer.scenario import Send

    sends = sum(1 for s in shrunk.scenario.steps if isinstance(s, Send))
    how = (
        f"shrunk to {sends} sends in {shrunk.runs} runs" if shrunk.reproduced else "not reproduced"
    )
    return f"case {case.number} ({case.scenario.name}): {why.splitlines()[0]}; {how}"


def save_finding(finding: Finding, checks: dict[Scenario, CaseCheck], out: Path) -> Path:
    """The shrunk case saved as a replay scenario in ``out``; its description says what
    the case was, why it failed, and the kernel log lines read after it."""
    case, shrunk = finding.case, finding.shrunk
    head = [
        f"fuzz case {case.number} of seed {case.seed}, from scenario {case.base}",
        *(f"mutation: {m}" for m in case.mutations),
        f"shrunk in {shrunk.runs} DUT runs"
        if shrunk.reproduced
        else "not reproduced: it failed once, so it is kept whole",
    ]
    checked = checks.get(shrunk.scenario) or checks.get(case.scenario)
    return _save(shrunk.scenario, head, checked, out)


def save_crash(checked: CaseCheck, seed: int, out: Path) -> Path:
    """A case that crashed a host, saved whole (it cannot be shrunk on a crashed pair)."""
    head = [f"fuzz seed {seed}: this case crashed a host; not shrunk"]
    if checked.known:
        head.append(f"the crash is a {checked.known}")
    return _save(checked.scenario, head, checked, out)


def _save(scenario: Scenario, head: list[str], checked: CaseCheck | None, out: Path) -> Path:
    """``scenario`` as ``out/NAME.yaml``, described by ``head`` and why it failed."""
    from hil.peer.scenario import save

    path = out / f"{scenario.name}.yaml"
    save(replace(scenario, description=_description(head, checked)), path)
    return path


def _description(head: list[str], checked: CaseCheck | None) -> str:
    lines = [*head, f"why it failed: {_why(checked)}"]
    if checked is not None and checked.kernel:
        lines += ["kernel log after it:", *(f"  {k}" for k in checked.kernel)]
    return "\n".join(lines) + "\n"


def _why(checked: CaseCheck | None) -> str:
    if checked is None or not checked.reasons:
        return "(no reason kept)"
    return "\n".join(checked.reasons)


def _dut_text(checked: CaseCheck) -> str:
    if checked.failed:
        known = f"\nthe crash is a {checked.known}" if checked.known else ""
        return "FAILED\n" + "\n".join(checked.reasons) + known
    if checked.error:
        return f"could not run: {checked.error}"
    return "ok (kernel log clean, nothing leaked, a normal connect afterwards held)"


def _say(text: str) -> None:
    print(f"hil: {text}", file=sys.stderr)
