"""TestRun (hil/run/testrun.py): the stages around one test, its verdicts and its outcome.

Behind a stand-in pair run whose hosts are agents at the boundary (resource
counts, a kernel log, ``uname``); the judge, the evidence and the observers
are the real ones.  The whole way on real siw guests, from pytest and from
``hil cm run``, is tests/run/test_pairrun_lab.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from hil.agent.types import CommandResult, KernelLog, KmsgRecord
from hil.errors import HilError
from hil.host.liveness import Crash
from hil.judge.contract import check
from hil.judge.profiles import profile_for
from hil.run.observer import EvidenceReport, Observer, Observers, TestInfo, TestResult
from hil.run.pairfacts import PairFacts
from hil.run.testparts import TestOptions
from hil.run.testrun import TestRun
from hil.run.wirestage import LinkWire, WireStage
from tests.judge.cmtimelines import orderly_close

QUICK = TestOptions(wire=False, settle_s=0.5, attempts=False)


class Agent:
    """A host's agent: resource counts the test may change, a kernel log, uname."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.qp = 0
        # The types its `rdma resource show` summary lists: a 6.1 lab guest's seven.
        self.types = ["cm_id", "qp", "cq", "mr", "pd", "ctx", "srq"]
        self.log: list[str] = []
        self.calls: list[str] = []

    def rdma_resources(
        self, types: Sequence[str] | None = None, timeout: float = 30
    ) -> dict[str, int]:
        self.calls.append("rdma_resources")
        return {**dict.fromkeys(self.types, 0), "qp": self.qp}

    def kmsg_cursor(self) -> int:
        self.calls.append("kmsg_cursor")
        return 1

    def kmsg_read(self, cursor: int) -> KernelLog:
        self.calls.append("kmsg_read")
        return KernelLog(tuple(KmsgRecord(i, 0, 3, 0, m) for i, m in enumerate(self.log)), 0)

    def kmsg_close(self, cursor: int) -> None:
        pass

    def run(
        self, argv: Sequence[str], timeout: float = 60.0, input: str | None = None
    ) -> CommandResult:
        if argv[0].endswith("uname"):
            return CommandResult(tuple(argv), 0, "6.1.0-lab\n", "")
        return CommandResult(tuple(argv), 1, "", "No such file or directory")  # no kmemleak


class Told(Observer):
    def __init__(self) -> None:
        self.calls: list[str] = []
        self.result: TestResult | None = None
        self.evidence_report: EvidenceReport | None = None

    def test_started(self, info: TestInfo) -> None:
        self.calls.append(f"started {info.name} on {info.kernels}")
        self.ends = info.ends

    def evidence(self, report: EvidenceReport) -> None:
        self.calls.append("evidence")
        self.evidence_report = report

    def test_finished(self, result: TestResult) -> None:
        self.calls.append(f"finished {result.outcome}")
        self.result = result


def _run(told: Observer) -> Any:
    agents = {"lab-a": Agent("lab-a"), "lab-b": Agent("lab-b")}
    hosts = SimpleNamespace(agent=agents.__getitem__)
    pair = SimpleNamespace(
        name="ab",
        host_a=SimpleNamespace(name="lab-a"),
        host_b=SimpleNamespace(name="lab-b"),
        hosts=[SimpleNamespace(name=n) for n in agents],
    )
    facts = PairFacts(hosts, ("lab-a", "lab-b"))  # type: ignore[arg-type]
    facts._targets = {}  # siw: no driver debugfs to count
    run = SimpleNamespace(
        pair=pair,
        hosts=hosts,
        agents=agents,
        provider=SimpleNamespace(driver="siw", hosts=()),
        state=None,
        facts=facts,
        profile=profile_for("siw"),
        observers=Observers([told]),
        pinned={},
        store=Markers(),
        lease=SimpleNamespace(id="L1"),
    )
    run.wire = LinkWire(hosts, pair, "siw")  # type: ignore[arg-type]
    return run


class Markers:
    """The store's attempt markers, as the test's TestRun writes them."""

    def __init__(self) -> None:
        self.markers: list[list[str]] = []

    def begin_attempt(self, test: str, pair: str, hosts: tuple[str, str], lease_id: str) -> int:
        self.markers.append([test, pair, lease_id])
        return len(self.markers) - 1

    def end_attempt(self, attempt_id: int, outcome: str) -> None:
        self.markers[attempt_id].append(outcome)


def test_a_clean_test_passes_with_every_stage_told_in_order() -> None:
    told = Told()
    run = _run(told)
    with TestRun(run, "test_x", QUICK) as t:
        run.observers.timeline(orderly_close(), True)
    assert t.result is not None and t.result.ok, t.result
    assert told.calls == ["started test_x on ('6.1.0-lab',)", "evidence", "finished passed"]
    stages = t.result.stages
    assert {"marker", "before", "baseline", "test", "after", "settle", "kernel log"} <= set(stages)
    assert stages["before"] >= stages["baseline"] and stages["after"] >= stages["settle"]
    assert [c for c in run.agents["lab-a"].calls if c.startswith("kmsg")] == [
        "kmsg_cursor",
        "kmsg_read",
    ]


def test_observers_are_told_what_each_end_of_the_pair_runs() -> None:
    told = Told()
    run = _run(told)
    siw = profile_for("siw")
    run.provider = SimpleNamespace(
        driver="siw",
        hosts=tuple(SimpleNamespace(host=h, driver="siw", profile=siw) for h in run.agents),
    )
    with TestRun(run, "test_x", QUICK):
        run.observers.timeline(orderly_close(), True)
    assert told.ends == (
        f"lab-a: siw, kernel 6.1.0-lab, profile {siw.name}",
        f"lab-b: siw, kernel 6.1.0-lab, profile {siw.name}",
    )


def test_a_timeline_never_handed_to_the_contract_is_judged_and_fails_the_test() -> None:
    told = Told()
    run = _run(told)
    with TestRun(run, "test_x", QUICK):
        run.observers.timeline(orderly_close(status=-110), True)
    assert told.result is not None and told.result.outcome == "failed"
    (failure,) = told.result.failures
    assert "close" in failure and "FAILED" in failure.upper()


def test_a_timeline_the_test_judged_itself_is_left_to_the_test() -> None:
    run = _run(Told())
    with TestRun(run, "test_x", QUICK) as t:
        tl = orderly_close(status=-110)
        run.observers.timeline(tl, True)
        assert not t.contract(tl).ok  # the test fails there, or meant to see the violation
    assert t.result is not None and t.result.failures == ()
    assert len(t.result.contract) == 1


def test_resources_not_back_and_a_bad_kernel_line_fail_the_evidence() -> None:
    told = Told()
    run = _run(told)
    with TestRun(run, "test_x", QUICK):
        run.agents["lab-b"].qp = 1
        run.agents["lab-a"].log.append(
            "BUG: kernel NULL pointer dereference, address: 0000000000000008"
        )
    assert told.result is not None and told.result.outcome == "failed"
    (text,) = told.result.failures
    assert "qp" in text and "NULL pointer" in text
    assert told.evidence_report is not None and told.evidence_report.check is not None


def test_types_a_hosts_summary_lacks_reach_the_evidence_as_not_counted() -> None:
    told = Told()
    run = _run(told)
    run.agents["lab-b"].types = ["cm_id", "qp", "cq", "mr", "pd"]  # an older kernel's
    with TestRun(run, "test_x", QUICK) as t:
        pass
    assert t.result is not None and t.result.ok, t.result
    report = told.evidence_report
    assert report is not None and report.check is not None
    assert report.check.not_counted == {"lab-b": ("ctx", "srq")}


def test_a_crashed_host_skips_every_stage_that_asks_the_hosts() -> None:
    told = Told()
    run = _run(told)
    with TestRun(run, "test_x", QUICK) as t:
        run.agents["lab-b"].calls.clear()
        t.crash(Crash("lab-b", "kernel_crash", "Kernel panic - not syncing: Fatal exception"))
    assert run.agents["lab-b"].calls == []
    assert told.result is not None and told.result.outcome == "host crashed"
    assert "evidence" not in told.calls


class Gone(Agent):
    """An agent whose connection is cut under the test (a Ctrl-C mid-call), once ``gone``."""

    gone = False

    def rdma_resources(
        self, types: Sequence[str] | None = None, timeout: float = 30
    ) -> dict[str, int]:
        if self.gone:
            raise HilError(f"{self.name}: agent rdma_resources: the agent ended")
        return super().rdma_resources(types, timeout)


def test_an_agent_lost_under_an_interrupted_test_leaves_the_interrupt_and_a_lab_error() -> None:
    """Seen on the debug lab (2026-12-06): the evidence's HilError replaced the
    KeyboardInterrupt, and ``hil peer fuzz`` ended with 'hil: error' for a Ctrl-C."""
    run = _run(Told())
    gone = run.agents["lab-b"] = Gone("lab-b")
    with pytest.raises(KeyboardInterrupt):
        with TestRun(run, "test_x", QUICK) as t:
            gone.gone = True
            raise KeyboardInterrupt
    assert t.result is not None and t.result.outcome == "error"
    assert any("evidence not taken after the test: lab-b" in e for e in t.result.lab_errors)


def test_the_tests_own_failure_is_its_outcome() -> None:
    run = _run(Told())
    with pytest.raises(RuntimeError):
        with TestRun(run, "test_x", QUICK) as t:
            raise RuntimeError("boom")
    assert t.result is not None and t.result.outcome == "error"


def _usable_plan() -> Any:
    point = SimpleNamespace(name="lab-a:eth1", host="lab-a")
    return SimpleNamespace(usable=True, reason="", points=(point,))


def test_a_capture_that_did_not_start_is_a_lab_error_not_a_skip(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from hil.wire import linkcapture, plan

    monkeypatch.setattr(plan, "capture_plan", lambda pair, driver: _usable_plan())
    not_started = SimpleNamespace(
        running={},
        missing=["lab-a:eth1"],
        notes=["capture point lab-a:eth1: not captured: tcpdump: permission denied"],
        discard=lambda: None,
    )
    monkeypatch.setattr(linkcapture.LinkCapture, "start", lambda hosts, p, count: not_started)
    told = Told()
    run = _run(told)
    with TestRun(run, "test_x", TestOptions(settle_s=0.5)):
        pass
    assert told.result is not None and told.result.outcome == "failed"
    (error,) = told.result.lab_errors
    assert "not judged on the wire" in error and "permission denied" in error


def test_a_point_that_delivered_no_file_is_a_lab_error(tmp_path: Path) -> None:
    captured = SimpleNamespace(files={}, notes=("capture point lab-a:eth1: capture lost: EOF",))
    link = SimpleNamespace(cut=lambda directory, timelines, count: captured)
    stage = WireStage(link, _usable_plan(), None, 10)  # type: ignore[arg-type]
    with pytest.raises(HilError, match="lab-a:eth1 delivered no file: .*capture lost"):
        stage.finish((), profile_for("siw"))
    stage.close()


def test_a_capture_that_stopped_during_the_test_is_a_lab_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from hil.wire import plan

    monkeypatch.setattr(plan, "capture_plan", lambda pair, driver: _usable_plan())
    link = LinkWire(None, None, "siw")  # type: ignore[arg-type]
    stage = WireStage(link, _usable_plan(), None, 10)
    with pytest.raises(HilError, match="the capture stopped during the test"):
        stage.finish((), profile_for("siw"))
    stage.close()


def test_a_link_with_no_capture_point_is_judged_with_every_rule_skipped() -> None:
    plan = SimpleNamespace(usable=False, reason="capture: none on link ab", points=())
    report = WireStage(None, plan, None, 10).finish((), profile_for("siw"))  # type: ignore[arg-type]
    assert report.verdict.ok and report.verdict.count("skip") == len(report.verdict.results)


def test_the_attempt_marker_brackets_the_test_and_ends_with_its_outcome() -> None:
    run = _run(Told())
    marked = TestOptions(wire=False, settle_s=0.5)
    with TestRun(run, "test_ok", marked):
        assert run.store.markers == [["test_ok", "ab", "L1"]]  # written before the test
    with TestRun(run, "test_crash", marked) as t:
        t.crash(Crash("lab-b", "unreachable", "no answer for 31 s"))
    assert run.store.markers[0][-1] == "passed"
    assert run.store.markers[1][-1] == "host crashed"


def test_a_test_of_the_hosts_only_gets_its_marker_and_no_rdma_stage() -> None:
    told = Told()
    run = _run(told)
    with TestRun(run, "test_hosts", TestOptions(settle_s=0.5), rdma=False) as t:
        t.interrupt("signal 15 (SIGTERM): restoring before exit")
    assert told.calls == ["started test_hosts on ('6.1.0-lab',)", "finished interrupted"]
    assert run.agents["lab-a"].calls == []  # no baseline, no kernel log
    assert run.store.markers == [["test_hosts", "ab", "L1", "interrupted"]]


def test_a_timeline_told_as_one_copy_and_judged_as_another_is_judged_once() -> None:
    # A recording tells the observers one copy of its timeline and returns another, which
    # the CM session judges: the TestRun must not judge (and report) it a second time.
    verdicts: list[object] = []

    class Verdicts(Observer):
        def verdict(self, timeline: Any, verdict: Any) -> None:
            verdicts.append(verdict)

    run = _run(Verdicts())
    with TestRun(run, "test_x", QUICK) as t:
        run.observers.timeline(orderly_close(), True)  # what the recording told
        returned = orderly_close()  # what it returned, which the CM session judged
        run.observers.verdict(returned, check(returned, run.profile))
        assert t.contract(returned).ok  # the test reads that verdict
    assert t.result is not None and len(t.result.contract) == 1 and len(verdicts) == 1
