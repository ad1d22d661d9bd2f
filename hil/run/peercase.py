"""One fuzz case (or replay) on a set-up pair: a peer scenario as a test, then the DUT checked.

    dut = DutCheck(run, "a")
    checked = dut.check(scenario)        # checked.failed, checked.reasons, checked.kernel

The scenario runs inside a :class:`hil.run.testrun.TestRun` (``run.test``), so the
DUT gets the after-test checks every suite test gets: the resources back to their
baseline and the kernel log clean (hil/host/evidence.py, hil/judge/checks.py), and
kmemleak on a debug kernel (the DUT's host alone, scanned by the check itself, or
once a batch: :meth:`DutCheck.scan`); the crash watch runs throughout.  After the scenario a
normal connection is made to the DUT (the ``connect`` sequence, the peer's host
active, judged by the contract), as suites/test_wire_conformance.py does.

A case **fails** when the DUT shows something wrong of its own: a kernel log line
the after-test checks fail (a WARNING, an oops, a KASAN or kmemleak report), a
leaked resource, a crash, a normal connect afterwards that fails, or private data the
peer never sent in one of the DUT's cm events (kernel memory: the peer judge's universal
rule; a provider's known finding of that kind is told apart, :func:`unsent_private_data`).  It does
**not** fail because the DUT answered the fuzzed frames differently from the base
scenario's expectation: a mutated scenario has no expectation, so the peer's verdict
is shown and never judged (its timeline is handed to the contract as judged).  A case
that could not run (the peer or an agent erred with no host crashed) is an error,
not a finding.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from hil.cm.endpointpool import EndpointPool
from hil.errors import HilError
from hil.host import kmemleak
from hil.judge.checks import REPORT_START
from hil.judge.known import known_crash
from hil.judge.peerproviders import known_unsent
from hil.judge.timeline import KernelLogLine
from hil.peer.run import peer_of, run_scenario
from hil.peer.triggers import sets_off
from hil.run.testparts import TestOptions

if TYPE_CHECKING:
    from hil.cm.session import CMSession
    from hil.host.liveness import Crash
    from hil.judge.known import KnownFinding
    from hil.peer.judge import Observed, PeerVerdict
    from hil.peer.scenario import Scenario
    from hil.run.observer import TestResult
    from hil.run.pairrun import PairRun
    from hil.run.request import Progress
    from hil.run.testrun import TestRun

PRINTK_TIME = re.compile(r"^\[\s*\d+\.\d+\] ?")  # "[   43.349835] " on a guest's console
AFTER_CONNECT = "connect"  # the registered sequence that shows the DUT still accepts one
AFTER_PRIVATE_DATA = b"hil-after-fuzz"


@dataclass(frozen=True)
class CaseCheck:
    """What one scenario run showed of the DUT: why it failed (nothing: it passed), the
    kernel log lines read after it, the peer's verdict (shown only) and any error."""

    scenario: Scenario
    reasons: tuple[str, ...] = ()
    kernel: tuple[str, ...] = ()
    peer: PeerVerdict | None = None
    error: str = ""  # the case could not run; not a finding
    crash: Crash | None = None  # a pair host crashed: no case runs until it is recovered
    known: str = ""  # the known kernel finding the crash is (its line; '' none)
    # Known findings it showed, told apart (their lines): kernel reports in the log after
    # it, private data the peer never sent where the provider is known to give it.
    known_reports: tuple[str, ...] = ()

    @property
    def failed(self) -> bool:
        """True when the DUT showed a finding (see the module doc)."""
        return bool(self.reasons)

    @property
    def crashed(self) -> bool:
        """True when a host of the pair crashed under the case."""
        return self.crash is not None


@dataclass
class DutCheck:
    """Runs scenarios with the DUT on side ``dut`` of a set-up pair run, and remembers each
    scenario's last check (the shrinker asks for a bool; the report wants the reasons)."""

    run: PairRun
    dut: str
    options: TestOptions = field(default_factory=TestOptions)
    checks: dict[Scenario, CaseCheck] = field(default_factory=dict)
    # The known kernel findings: a crash one of them explains is told as that finding.
    known: tuple[KnownFinding, ...] = ()

    def __post_init__(self) -> None:
        # kmemleak on the DUT's host alone, by this check, not by the test on both hosts.
        # The peer's host runs no fuzzed input in its kernel: the reference peer is a user
        # process on a plain TCP socket (hil/agent/remote/peer/endpoint.py, _connect and
        # _accept: socket.SOCK_STREAM), so the mutated frames are bytes of its kernel's TCP,
        # never parsed by its RDMA stack; what its kernel's RDMA stack runs is the active
        # side of the unmutated normal connect (``_after``), the debug lab's suites' path,
        # scanned there after every test on both hosts.  A scan is 30-55 s a guest.
        # A known kernel report (lockdep's once a boot) is told apart in every case, as a
        # known crash is: the fuzz looks for new ones.
        self.options = replace(self.options, kmemleak=False, known=self.known, known_anywhere=True)
        pair = self.run.pair
        self._dut_host = (pair.host_a if self.dut == "a" else pair.host_b).name
        self._ended = time.monotonic()  # when the last case ended
        self._open()

    def _open(self) -> None:
        """The kept CM endpoints started, and kmemleak's boot leaks cleared (once per set-up
        pair: before the first case, and again after a recovery's reboot)."""
        peer = "b" if self.dut == "a" else "a"
        self._kmemleak = self._dut_host in self.run.facts.kmemleak_hosts()
        # Read while the hosts answer: a crash's known finding is looked up by them.
        self._releases = self.run.facts.kernels()
        self._dut_release = self.run.facts.kernel_by_host()[self._dut_host]
        # The cases' CM endpoints are kept from one recording to the next, one worker per
        # host (hil.cm.endpointpool: a worker's start and end were a fifth of a case);
        # started before the first case's baseline, so that each case's holds them.
        self._pool = EndpointPool()
        # No evidence of the scenario's own recording: the case's test takes it (its
        # baseline before, the settle and kernel log after), and the recording's copy
        # cost two more round trips to each host per case.
        self._cm: CMSession = self.run.session(
            f"{self.dut}-{peer}", evidence=False, pool=self._pool
        )
        peer_of(self._cm, self.dut)  # a peer: host the run cannot use, refused before a case
        # The DUT passive for the normal connect: it comes from the peer's host.
        self._after: CMSession = self.run.session(
            f"{peer}-{self.dut}", evidence=False, pool=self._pool
        )
        self._pool.warm(self._after)

    def close(self) -> None:
        """End the kept CM endpoints (before the pair is restored)."""
        self._pool.close()

    def recover(self, crash: Crash, *, say: Progress, timeout: float) -> None:
        """After a case crashed a host: its failure noted in the store, the host recovered
        and the pair set up again (:meth:`PairRun.recover`, as the plugin does after a
        crashed test), the kept CM endpoints started anew, so that the next case runs as
        the first did.  HilError when the host has no power hil may cycle, or cannot be
        recovered."""
        from hil.host.healthcheck import note_failure
        from hil.host.power import may_cycle

        host = crash.host
        note_failure(self.run.store, host, crash.kind, f"during a fuzz case: {crash.detail}")
        if not may_cycle(self.run.inventory.host(host)):
            raise HilError(
                f"{host}: crashed, and its inventory entry has no power that hil may cycle: "
                f"recover it by hand (hil host recover {host})"
            )
        # Its agent and SSH are gone: the pool's close must not wait on them.
        self.run.hosts.forget(host)
        self._pool.close()
        self.run.recover(host, say=say, timeout=timeout)
        self._ended = time.monotonic()
        self._open()

    def check(self, scenario: Scenario, scan: bool = True) -> CaseCheck:
        """Run ``scenario`` as a test on the pair, then judge the DUT (module doc); with
        ``scan``, kmemleak scanned on the DUT after it (without: the caller scans later)."""
        reasons: list[str] = []
        told: list[str] = []
        peer: PeerVerdict | None = None
        error = ""
        with self.run.test(f"hil peer {scenario.name}", self.options) as t:
            try:
                # Not judged: the case ends with its last step (run_scenario's doc); a
                # replay runs as the case ran, so that a finding is made again.
                ran = run_scenario(self._cm, self.dut, scenario, judged=False)
                peer = ran.verdict
                t.contract(ran.timeline)  # judged by no rule: fuzzed frames have no expectation
                leaked, told = unsent_private_data(ran.seen, peer.provider)
                reasons += leaked
            except HilError as e:
                error = f"{type(e).__name__}: {e}"
            if not error:
                reasons += self._connect(t)
        assert t.result is not None
        self._ended = time.monotonic()
        checked = judged(scenario, t.result, reasons, peer, error)
        if told:
            checked = replace(checked, known_reports=(*checked.known_reports, *told))
        if checked.crash is not None:
            checked = replace(checked, known=self._known(checked.crash))
        elif scan:
            checked = self._with_scan(checked)
        self.checks[scenario] = checked
        return checked

    def scan(self) -> str:
        """kmemleak scanned on the DUT's host now, once the last case's objects are old enough
        to be reported: the new leaks as a reason ('' when none, or no kmemleak there).
        The scan's own kernel log line comes after the last case's read and before the
        next case's baseline, so no case's kernel-log check sees it."""
        if not self._kmemleak:
            return ""
        host = self._dut_host
        report = kmemleak.scan(self.run.hosts.agent(host), host, since=self._ended)
        return f"kmemleak on {host}:\n{report}" if report else ""

    def not_run(self, scenario: Scenario) -> str:
        """Why ``scenario`` is not run on this DUT: it sends the fuzz trigger of a known
        finding that stops the DUT's kernel ('' when it sends none)."""
        for finding in self.known:
            trigger = finding.fuzz_trigger
            if trigger is None or not finding.known_on(self._dut_release):
                continue
            what = sets_off(scenario, trigger)
            if what:
                return (
                    f"{what}, which stops {self._dut_release}: known kernel finding "
                    f"{finding.id} ({trigger})"
                )
        return ""

    def _known(self, crash: Crash) -> str:
        return crash_known(crash, self.known, self._releases)

    def _with_scan(self, checked: CaseCheck) -> CaseCheck:
        try:
            leak = self.scan()
        except HilError as e:
            return checked if checked.failed else replace(checked, error=f"kmemleak: {e}")
        if not leak:
            return checked
        return replace(checked, reasons=(*checked.reasons, leak), error="")

    def _connect(self, t: TestRun) -> list[str]:
        try:
            timeline = self._after.run(AFTER_CONNECT, private_data=AFTER_PRIVATE_DATA)
        except HilError as e:
            return [f"a normal connect to the DUT afterwards failed: {e}"]
        verdict = t.contract(timeline)
        if verdict.ok:
            return []
        return [f"a normal connect to the DUT afterwards broke the contract:\n{verdict.to_text()}"]


def unsent_private_data(seen: Observed, provider: str) -> tuple[list[str], list[str]]:
    """The DUT's events that gave its application private data the peer never sent, as
    (reasons: each a finding, lines: each explained by a known finding of the provider).
    Whatever the fuzzed frames were, the application may only get bytes the peer sent:
    more is kernel memory (the universal rule of the peer judge, hil/peer/judge.py)."""
    leaked, told = [], []
    for event, line in seen.unsent():
        known = known_unsent(provider, event)
        if known:
            told.append(f"{line}: known finding {known}")
        else:
            leaked.append(f"the DUT's application got private data the peer never sent: {line}")
    return leaked, told


def crash_known(crash: Crash, findings: tuple[KnownFinding, ...], releases: tuple[str, ...]) -> str:
    """The line of the known finding that explains ``crash`` on these kernel releases ('' when
    none does); a console's lines lose their printk time first, as the agent streams them."""
    lines = [KernelLogLine(crash.host, PRINTK_TIME.sub("", line)) for line in crash.lines]
    match = known_crash(lines, findings, REPORT_START, releases)
    return "" if match is None else match.line()


def judged(
    scenario: Scenario,
    result: TestResult,
    reasons: list[str],
    peer: PeerVerdict | None,
    error: str,
) -> CaseCheck:
    """The case's check from its test's result: ``reasons`` (the normal connect's) and the
    after-test checks, kmemleak and a crash; the peer's verdict is kept, never judged."""
    check = result.evidence.check if result.evidence is not None else None
    kernel = tuple(f"{k.host}: {k.line}" for k in check.kernel_log) if check else ()
    told = tuple(m.line() for m in check.known) if check else ()
    if check is not None and not check.ok:
        reasons.append(check.to_text())
    for host, report in (result.kernel.kmemleak if result.kernel else {}).items():
        if report:
            reasons.append(f"kmemleak on {host}:\n{report}")
    if result.crash is not None:
        reasons.append(f"host crashed: {result.crash}")
        kernel += tuple(f"{result.crash.host}: {line}" for line in result.crash.lines)
    if result.lab_errors and not error:
        error = "; ".join(result.lab_errors)
    if reasons:
        error = ""  # the DUT's own finding explains the case's trouble
    return CaseCheck(
        scenario, tuple(reasons), kernel, peer, error, result.crash, known_reports=told
    )
