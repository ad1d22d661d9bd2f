"""TestRun: one test on a set-up pair, with every stage around it in one written order.

``PairRun.test(name)`` gives one; pytest's plugin wraps every test on the pair
in it, and so does ``hil cm run``, so both judge a test the same way::

    with run.test("hil cm run close") as t:
        timeline = run.session("a-b").run("close")
    print(t.result.outcome, t.result.failures)

On entry, in this order (the capture's window and the baseline at once):

1. the attempt marker written to the store (what ran when a run or host died:
   docs/crashes.md);
2. observers told ``test_started``;
3. the test's window of the link's capture begun (:mod:`hil.run.wirestage`: one
   capture runs for the pair run; it is started by the first test, and again
   where it stopped);
4. the baseline: each host's RDMA resource counts, its driver's own QP and
   endpoint counts and a kernel-log cursor (:mod:`hil.host.evidence`), and
   the NIC counters and debugfs snapshots when asked for;
5. the crash watch started (:class:`hil.host.liveness.Watch`, bound
   ``liveness_s``): it covers the rest of the test's setup, its call, its
   teardown, the settle and the checks;

then the test runs; on exit:

6. the settle: the counts given ``settle_s`` to come back to the baseline;
7. at once: kmemleak scanned where the kernel has it, then the kernel log read
   and the evidence judged (known kernel findings of this test told apart);
   and the capture's window cut, decoded, placed and judged by the wire rules;
8. every complete timeline the test recorded judged by the contract, also
   those the test never handed to ``contract``;
9. observers told ``kernel_findings``, ``evidence``, ``wire_verdict``; the
   crash watch stopped; the attempt marker ended with the outcome; observers
   told ``test_finished``; the window's files removed.

A test on a pair that is not set up for RDMA (``rdma=False``: it only uses
the hosts) gets steps 1, 2, 5 and 9.  A crash of a pair host (:meth:`crash`,
from the watch or told) skips every stage that would ask the hosts;
:meth:`interrupt` and :meth:`fail` record why the test itself ended.
The result (:class:`hil.run.observer.TestResult`) holds the contract, wire,
evidence and kernel verdicts and the outcome; ``failures`` lists each failed
verdict's text, ``lab_errors`` the stages that could not run.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import TYPE_CHECKING, Self

from hil.errors import HilError
from hil.host import evidence, kmemleak
from hil.judge.checks import AfterState, Known, assess
from hil.judge.contract import Verdict, check
from hil.judge.timeline import Timeline, explain
from hil.run.observer import (
    EvidenceReport,
    KernelFindings,
    Outcome,
    TestInfo,
    TestResult,
)
from hil.run.testparts import Collected, Keeper, TestedPair, TestOptions

if TYPE_CHECKING:
    from hil.host.hwevidence import HostSnapshot, HwEvidence, Target
    from hil.host.liveness import Crash, Watch
    from hil.run.wirestage import WireStage

log = logging.getLogger(__name__)


class TestRun:
    """One test on the pair (see the module doc); use it as a context manager."""

    __test__ = False

    def __init__(
        self,
        run: TestedPair,
        name: str,
        options: TestOptions | None = None,
        *,
        rdma: bool = True,
        on_crash: Callable[[Crash], None] | None = None,
        describe: Callable[[Crash], Crash] | None = None,
    ) -> None:
        self.run = run
        self.name = name
        self.options = options or TestOptions()
        self.rdma = rdma  # the pair is set up for RDMA: every stage; else marker and watch
        self._on_crash = on_crash  # also told of a crash the watch declares (any thread)
        self._describe = describe  # adds what else is known of a crash (a console's tail)
        self._watch: Watch | None = None
        self._attempt: int | None = None
        self._keeper = Keeper()
        self._wire: WireStage | None = None
        self._baseline: evidence.Baseline | None = None
        self._before: dict[str, HostSnapshot] | None = None
        self._notes: list[str] = []
        self._handed: list[Timeline] = []  # the timelines the test judged itself
        self._lock = threading.Lock()
        self._crash: Crash | None = None
        self._ended: tuple[Outcome, str] | None = None  # how the test itself ended, and why
        self._started = 0.0
        self._body_started = 0.0
        self.stages: dict[str, float] = {}  # seconds per stage (test: the test itself)
        self.result: TestResult | None = None

    # -- states ------------------------------------------------------------------

    def crash(self, crash: Crash) -> None:
        """A host of the pair crashed: no stage asks the hosts any more (any thread)."""
        if self._describe is not None:
            crash = self._describe(crash)
        with self._lock:
            if self._crash is None:
                self._crash = crash

    def confirm_crash(self) -> Crash | None:
        """After the test failed: did a host crash?  The watch probes every host now
        (bounded); the crash, or None when every host answered."""
        if self._crash is None and self._watch is not None:
            found = self._watch.confirm()
            if found is not None:
                self.crash(found)
        return self._crash

    @property
    def crashed(self) -> Crash | None:
        """The crash of a pair host under this test, once noticed."""
        return self._crash

    def interrupt(self, why: str) -> None:
        """The test was interrupted (Ctrl-C, SIGTERM, a session bound)."""
        self._ended = ("interrupted", why)

    def timeout(self, why: str) -> None:
        """The test overran its bound (the test timeout layer)."""
        self._ended = ("timed out", why)

    def fail(self, why: str, outcome: Outcome = "failed") -> None:
        """The test itself failed (or errored, or was skipped: ``outcome``)."""
        if self._ended is None or self._ended[0] == "passed":
            self._ended = (outcome, why)

    def contract(self, timeline: Timeline) -> Verdict:
        """The contract's verdict on ``timeline``, which the test judges itself (its failure
        is the test's): the one its CM run gave, else judged now and told to the observers."""
        self._handed.append(timeline)
        return self._verdict(timeline)

    def _verdict(self, timeline: Timeline) -> Verdict:
        verdict = self._keeper.verdict_of(timeline)
        if verdict is None:
            verdict = check(timeline, self.run.profile)
            self.run.observers.verdict(timeline, verdict)  # the keeper among them
        return verdict

    # -- entry ---------------------------------------------------------------------

    @contextmanager
    def _timed(self, stage: str) -> Iterator[None]:
        """How long ``stage`` took, in :attr:`stages` (seconds; stages may overlap)."""
        start = time.monotonic()
        try:
            yield
        finally:
            self.stages[stage] = self.stages.get(stage, 0.0) + time.monotonic() - start

    def __enter__(self) -> Self:
        run = self.run
        self._started = time.monotonic()
        with self._timed("marker"):
            self._begin_attempt()
        run.observers.add(self._keeper)
        try:
            with self._timed("before"):
                run.observers.test_started(self.info())
                if self.rdma:
                    with ThreadPoolExecutor(max_workers=2) as pool:
                        wire = pool.submit(self._start_wire) if self.options.wire else None
                        with self._timed("baseline"):
                            self._take_baseline()
                        self._wire = None if wire is None else wire.result()
                with self._timed("watch start"):
                    self._start_watch()
        except BaseException as e:
            self.__exit__(type(e), e, None)
            raise
        self._body_started = time.monotonic()
        return self

    def info(self) -> TestInfo:
        """The test as observers see it."""
        run = self.run
        names = (run.pair.host_a.name, run.pair.host_b.name)
        kernels = run.facts.kernel_by_host()
        if not self.rdma:
            ends = tuple(f"{n}: kernel {kernels[n]}" for n in names)
            return TestInfo(self.name, run.pair.name, names, "", run.facts.kernels(), ends=ends)
        ends = tuple(
            f"{h.host}: {h.driver}, kernel {kernels[h.host]}, profile {h.profile.name}"
            for h in run.provider.hosts
        )
        return TestInfo(
            self.name,
            run.pair.name,
            names,
            run.provider.driver,
            run.facts.kernels(),
            run.pinned,
            ends,
        )

    def _begin_attempt(self) -> None:
        run = self.run
        if not self.options.attempts:
            return
        try:
            names = (run.pair.host_a.name, run.pair.host_b.name)
            self._attempt = run.store.begin_attempt(self.name, run.pair.name, names, run.lease.id)
        except HilError as e:
            log.warning("could not record the attempt of %s: %s", self.name, e)

    def _end_attempt(self, outcome: str) -> None:
        if self._attempt is None:
            return
        try:
            self.run.store.end_attempt(self._attempt, outcome)
        except HilError as e:
            log.warning("could not end attempt %d: %s", self._attempt, e)

    def _start_watch(self) -> None:
        if not self.options.liveness_s:
            return
        from hil.host.liveness import Watch

        run = self.run
        names = [run.pair.host_a.name, run.pair.host_b.name]

        def noticed(crash: Crash) -> None:
            self.crash(crash)
            if self._on_crash is not None and self._crash is not None:
                self._on_crash(self._crash)
            # The test's own cleanup must not wait out a call bound on the dead host:
            # with its agent and session dropped, those calls fail at once.
            run.hosts.forget(crash.host)

        try:
            self._watch = Watch(run.hosts, names, noticed, bound=self.options.liveness_s).start()
        except HilError as e:
            log.warning("no crash watch for %s: %s", self.name, e)

    def _start_wire(self) -> WireStage:
        run = self.run
        with self._timed("capture start"):
            return run.wire.begin(self.options.wire_packets)

    def _take_baseline(self) -> None:
        if not self.options.evidence:
            return
        run = self.run
        targets = run.facts.targets(run.provider, run.state)
        if run.facts.targets_note:
            self._notes.append(run.facts.targets_note)
        agents = {h.name: run.hosts.agent(h.name) for h in run.pair.hosts}
        counters = {host: _counter(run, t) for host, t in targets.items()}
        self._baseline = evidence.begin(agents, counters)
        if self.options.hw_snapshots and targets:
            self._before = self._snapshots(targets, "before")

    def _snapshots(self, targets: dict[str, Target], when: str) -> dict[str, HostSnapshot] | None:
        from hil.host import hwevidence

        try:
            return evidence.each(
                targets, lambda t: hwevidence.snapshot(self.run.hosts.agent(t.host), t)
            )
        except HilError as e:
            self._notes.append(f"hardware evidence not taken {when} the test: {e}")
            return None

    # -- exit ----------------------------------------------------------------------

    def __exit__(self, kind: object, error: BaseException | None, tb: object) -> None:
        if self._body_started:
            self.stages["test"] = time.monotonic() - self._body_started
        if error is not None and self._ended is None:
            self.fail(f"{type(error).__name__}: {error}", "error")
        found = Collected()
        after = time.monotonic()
        try:
            if self._crash is None and self.rdma:
                self._judge_after(found)
            elif self._wire is not None:
                self._wire.discard()  # a crashed host's capture is gone: the next test starts one
            with self._timed("contract"):
                self._judge_timelines(found)
        finally:
            self.stages["after"] = time.monotonic() - after
            if self._watch is not None:
                self._watch.stop()
            self.run.observers.remove(self._keeper)
            self.result = self._result(found)
            self._end_attempt(self.result.outcome)
            self.run.observers.test_finished(self.result)
            if self._wire is not None:
                self._wire.close()

    def _judge_after(self, found: Collected) -> None:
        """Settle, then the evidence and kmemleak beside the wire judge."""
        run, base = self.run, self._baseline
        if base is None:
            self._wire_after_settle(found)
        else:
            agents = {h.name: run.hosts.agent(h.name) for h in run.pair.hosts}
            self._evidence(agents, base, found)
        if found.kernel is not None and found.kernel.any():
            run.observers.kernel_findings(found.kernel)
        if found.evidence is not None:
            run.observers.evidence(found.evidence)
        if found.wire is not None:
            run.observers.wire_verdict(found.wire)

    def _evidence(
        self, agents: Mapping[str, evidence.Probe], base: evidence.Baseline, found: Collected
    ) -> None:
        """Settle; then the wire judge beside kmemleak and the kernel log; judge them."""
        run = self.run
        try:
            with self._timed("settle"):
                resources, waited = evidence.settle(agents, base, self.options.settle_s)
        except HilError as e:
            # An agent lost under the test (a Ctrl-C in the middle of its call): a lab
            # error, never an exception of this exit, which would hide the test's own.
            found.lab_error(f"evidence not taken after the test: {e}")
            self._wire_after_settle(found)
            return
        # The last FIN or RST is in once the stack settled: stop the capture now.
        with ThreadPoolExecutor(max_workers=1) as pool:
            wire = pool.submit(self._wire_after_settle, found)
            try:
                with self._timed("kmemleak"):
                    found.kernel = self._kmemleak()
                with self._timed("kernel log"):
                    log_lines, lost = evidence.read_kernel_log(agents, base)
            except HilError as e:
                found.lab_error(f"evidence not taken after the test: {e}")
                wire.result()
                return
            wire.result()
        uncounted = evidence.not_counted(agents, resources)
        after = AfterState(resources, log_lines, lost, waited, not_counted=uncounted)
        names = (run.pair.host_a.name, run.pair.host_b.name)
        known = Known(
            self.options.known, self.name, run.facts.kernels(), self.options.known_anywhere
        )
        result = assess(after, run.profile, names, self.options.allow, known)
        found.evidence = EvidenceReport(result, self._hw_after(), tuple(self._notes))
        if not result.ok:
            found.failures.append(result.to_text())
        for host, report in (found.kernel.kmemleak if found.kernel else {}).items():
            if report:
                found.failures.append(f"kmemleak on {host}:\n{report}")

    def _kmemleak(self) -> KernelFindings:
        run = self.run
        leaky = run.facts.kmemleak_hosts() if self.options.kmemleak else ()
        if not leaky:
            return KernelFindings()
        # Both hosts at once: a scan takes 30-55 s in a TCG guest of the debug kernel.
        reports = evidence.each(
            {n: n for n in leaky},
            lambda n: kmemleak.scan(run.hosts.agent(n), n, since=self._started),
        )
        return KernelFindings(reports)

    def _hw_after(self) -> HwEvidence | None:
        from hil.host.hwevidence import HwEvidence

        if self._before is None:
            return None
        targets = self.run.facts.targets(self.run.provider, self.run.state)
        after = self._snapshots(targets, "after")
        return None if after is None else HwEvidence(self._before, after)

    def _wire_after_settle(self, found: Collected) -> None:
        if self._wire is None:
            return
        try:
            with self._timed("wire judge"):
                found.wire = self._wire.finish(tuple(self._keeper.timelines), self.run.profile)
        except HilError as e:
            found.lab_error(str(e))
            return
        if not found.wire.verdict.ok:
            found.failures.append(found.wire.verdict.to_text())

    def _judge_timelines(self, found: Collected) -> None:
        """Every complete timeline judged; a violation fails the test unless the test judged
        that timeline itself (it failed then, or meant to look at the violation)."""
        for timeline in self._keeper.timelines:
            verdict = self._verdict(timeline)
            if not verdict.ok and timeline not in self._handed:
                found.failures.append(explain(timeline, verdict.to_text()))

    def _result(self, found: Collected) -> TestResult:
        ended, _ = self._ended or ("passed", "")
        outcome: Outcome = ended
        if self._crash is not None:
            outcome = "host crashed"
        elif ended == "passed" and (found.failures or found.lab_errors):
            outcome = "failed"
        return TestResult(
            self.name,
            outcome,
            tuple(self._keeper.verdicts),
            found.wire,
            found.evidence,
            found.kernel,
            # Lab errors first: the report files a failure by how its message starts.
            (*(f"hil: LabError: {e}" for e in found.lab_errors), *found.failures),
            tuple(found.lab_errors),
            self._crash,
            dict(self.stages),
        )


def _counter(run: TestedPair, target: Target) -> evidence.Counter:
    from hil.host import hwevidence

    return hwevidence.counter(run.hosts.agent(target.host), target)


def tell_skipped(run: TestedPair, name: str, reason: str) -> None:
    """Observers told of a test skipped before it touched the pair (no stage ran)."""
    try:
        kernels = run.facts.kernels()
    except HilError:
        kernels = ()  # a host out of reach: the next test's setup says so
    hosts = (run.pair.host_a.name, run.pair.host_b.name)
    run.observers.test_started(TestInfo(name, run.pair.name, hosts, "", kernels))
    run.observers.test_finished(TestResult(name, "skipped", (), None, None, None, (), (), None))
