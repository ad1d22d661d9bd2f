"""The evidence of invariant 11 (hil.host.evidence): baseline, settle wait, kernel-log cursor.

Fake probes stand in for the agents' resource counts (or, in
:class:`SummaryProbe`, for the host's ``rdma`` tool, its JSON summed by the
agent's own code); the kernel-log part
also runs against the real agent and the real /dev/kmsg of this machine
(the suites run the whole after-test check against the virtual lab's
guests).  What the checks make of the evidence: tests/judge/test_checks.py.
"""

from __future__ import annotations

import functools
import time
import uuid
from collections.abc import Iterator, Sequence

import pytest

from hil.agent import Agent
from hil.agent.remote import rdma
from hil.agent.types import KernelLog, KmsgRecord
from hil.host import evidence
from hil.judge import checks
from hil.judge.expectations import DEFAULT_KERNEL_ALLOW
from hil.judge.profiles import SIW
from hil.judge.timeline import ResourceCount


class FakeProbe:
    """Counts that step through ``series`` on each call; a canned kernel log."""

    def __init__(
        self, series: Sequence[dict[str, int]], log: Sequence[str] = (), lost: int = 0
    ) -> None:
        self.series = list(series)
        self.log = list(log)
        self.lost = lost
        self.closed: list[int] = []

    def rdma_resources(
        self, types: Sequence[str] | None = None, timeout: float = 30.0
    ) -> dict[str, int]:
        counts = self.series[0] if len(self.series) == 1 else self.series.pop(0)
        return {t: counts[t] for t in (types or evidence.KINDS) if t in counts}

    def kmsg_cursor(self) -> int:
        return 7

    def kmsg_read(self, cursor: int) -> KernelLog:
        records = tuple(KmsgRecord(i, i, 4, 0, m) for i, m in enumerate(self.log))
        return KernelLog(records, self.lost)

    def kmsg_close(self, cursor: int) -> None:
        self.closed.append(cursor)


# `rdma -j resource show` of an idle host with one siw device: its summary lists every type
# the kernel tracks (iproute2 rdma/res.c `res_print_summary` prints nldev.c
# `fill_res_info`'s names; a 6.1 lab guest printed this, tests/agent/test_agent_rdma.py).
IDLE = [
    {
        "ifindex": 0,
        "ifname": "siw_data0",
        "pd": 0,
        "cq": 0,
        "qp": 0,
        "cm_id": 0,
        "mr": 0,
        "ctx": 0,
        "srq": 0,
    }
]
# The same on an older kernel, whose fill_res_info names pd, cq, qp, cm_id and mr only.
OLD_IDLE = [{"ifindex": 0, "ifname": "siw_data0", "pd": 0, "cq": 0, "qp": 0, "cm_id": 0, "mr": 0}]
LEAKABLE = ("mr", "cq", "pd", "ctx", "srq")


def _holding(summary: list[dict[str, object]], **counts: int) -> list[dict[str, object]]:
    """``summary`` with its first device holding ``counts``."""
    return [{**summary[0], **counts}, *summary[1:]]


class SummaryProbe(FakeProbe):
    """A host whose ``rdma -j resource show`` prints ``summaries`` in turn (the last one
    from then on), counted as the agent counts them."""

    def __init__(self, summaries: Sequence[list[dict[str, object]]]) -> None:
        super().__init__([])
        self.summaries = list(summaries)

    def rdma_resources(
        self, types: Sequence[str] | None = None, timeout: float = 30.0
    ) -> dict[str, int]:
        one = self.summaries[0] if len(self.summaries) == 1 else self.summaries.pop(0)
        return rdma.summary_counts(one, list(types or evidence.KINDS))


def _zero() -> dict[str, int]:
    return dict.fromkeys(evidence.KINDS, 0)


def _run(a: FakeProbe, b: FakeProbe, **kw: object) -> checks.CheckResult:
    probes = {"ha": a, "hb": b}
    base = evidence.begin(probes)
    return evidence.finish(probes, base, SIW, settle_s=kw.pop("settle_s", 1.0), **kw)  # type: ignore[arg-type]


def test_clean_run_passes_and_closes_the_cursors() -> None:
    a, b = FakeProbe([_zero()]), FakeProbe([_zero()], log=["siw: device registered"])
    result = _run(a, b)
    assert result.ok, result.to_text()
    assert result.verdict.rules == checks.RULES
    assert a.closed == [7] and b.closed == [7]
    assert "ha qp: 0 -> 0" in result.to_text()


def test_counts_that_come_back_within_the_wait_pass() -> None:
    # Baseline 0; the first look after the test still sees the destroyed QP.
    b = FakeProbe([_zero(), {**_zero(), "qp": 1, "cm_id": 1}, _zero()])
    result = _run(FakeProbe([_zero()]), b, settle_s=5.0)
    assert result.ok, result.to_text()


def test_a_leak_fails_naming_host_and_kind_with_counts() -> None:
    b = FakeProbe([{**_zero(), "cm_id": 2}, {**_zero(), "cm_id": 3, "mr": 1}])
    result = _run(FakeProbe([_zero()]), b, settle_s=0.3)
    assert not result.ok
    text = result.to_text()
    assert "[resources-back-to-baseline]" in text
    assert "hb holds 3 cm_id after the test, 2 before: 1 leaked" in text
    assert "hb mr: 0 -> 1   <-- leaked" in text
    assert result.waited_s >= 0.3


@pytest.mark.parametrize("kind", LEAKABLE)
def test_a_leak_of_each_type_the_summary_lists_fails_naming_it(kind: str) -> None:
    b = SummaryProbe([_holding(IDLE, cm_id=1), _holding(IDLE, cm_id=1, **{kind: 1})])
    result = _run(SummaryProbe([IDLE]), b, settle_s=0.3)
    assert [v.message for v in result.verdict.violations] == [
        f"hb holds 1 {kind} after the test, 0 before: 1 leaked"
    ]
    assert f"hb {kind}: 0 -> 1   <-- leaked" in result.to_text()


@pytest.mark.parametrize("kind", LEAKABLE)
def test_the_same_count_of_each_type_after_passes(kind: str) -> None:
    held = _holding(IDLE, **{kind: 2})
    result = _run(SummaryProbe([held]), SummaryProbe([held]))
    assert result.ok, result.to_text()
    assert f"ha {kind}: 2 -> 2" in result.to_text() and not result.not_counted
    assert {r.kind for r in result.resources} == set(evidence.KINDS)


def test_types_a_hosts_summary_lacks_are_said_not_counted_not_passed_as_zero() -> None:
    result = _run(SummaryProbe([IDLE]), SummaryProbe([OLD_IDLE]))
    assert result.ok, result.to_text()
    assert result.not_counted == {"hb": ("ctx", "srq")}
    text = result.to_text()
    assert "hb ctx, srq: not counted (its `rdma resource show` summary does not list them)" in text
    assert "hb srq:" not in text and "ha srq: 0 -> 0" in text


def test_a_host_that_counts_fewer_types_still_fails_a_leak_of_one_it_counts() -> None:
    b = SummaryProbe([OLD_IDLE, _holding(OLD_IDLE, pd=1)])
    result = _run(SummaryProbe([IDLE]), b, settle_s=0.3)
    assert [v.message for v in result.verdict.violations] == [
        "hb holds 1 pd after the test, 0 before: 1 leaked"
    ]
    assert result.not_counted == {"hb": ("ctx", "srq")}


def test_fewer_resources_than_before_is_fine() -> None:
    b = FakeProbe([{**_zero(), "qp": 2}, _zero()])
    assert _run(FakeProbe([_zero()]), b).ok


def test_the_kernel_log_and_lost_records_reach_the_judge() -> None:
    result = _run(FakeProbe([_zero()], lost=3), FakeProbe([_zero()], log=["WARNING: at x"]))
    assert [v.rule for v in result.verdict.violations] == ["kernel-log-clean"] * 2
    assert result.lost == {"ha": 3, "hb": 0}


def test_settle_0_reads_once_as_the_test_left_it(monkeypatch: pytest.MonkeyPatch) -> None:
    # The report's way: no waiting, and the cursors are closed all the same.  Its sleeps
    # are counted, not timed: a loaded machine may take 0.2 s over one read of the counts.
    slept: list[float] = []
    monkeypatch.setattr(evidence, "settle", functools.partial(evidence.settle, sleep=slept.append))
    a = FakeProbe([_zero(), {**_zero(), "qp": 1}, _zero()], log=["siw: x"])
    base = evidence.begin({"ha": a})
    started = time.monotonic()
    after = evidence.collect({"ha": a}, base, settle_s=0)
    took = time.monotonic() - started
    assert ResourceCount("ha", "qp", 0, 1) in after.resources and slept == []
    assert 0 <= after.waited_s <= took  # the one read's time, as measured
    assert [k.line for k in after.kernel_log] == ["siw: x"] and a.closed == [7]


def test_wait_is_bounded_with_a_fake_clock() -> None:
    now = [0.0]
    slept: list[float] = []

    def sleep(s: float) -> None:
        slept.append(s)
        now[0] += s

    probe = FakeProbe([{**_zero(), "qp": 1}])
    base = evidence.Baseline({"h": _zero()}, {"h": 1})
    counts, waited = evidence.settle(
        {"h": probe}, base, settle_s=2.0, poll_s=0.5, clock=lambda: now[0], sleep=sleep
    )
    assert waited == 2.0 and slept == [0.5, 0.5, 0.5, 0.5]
    assert ResourceCount("h", "qp", 0, 1) in counts


class KmsgOnly:
    """The real agent's kernel log with fixed resource counts (this host has no RDMA)."""

    def __init__(self, agent: Agent) -> None:
        self.agent = agent

    def rdma_resources(
        self, types: Sequence[str] | None = None, timeout: float = 30.0
    ) -> dict[str, int]:
        return _zero()

    def kmsg_cursor(self) -> int:
        return self.agent.kmsg_cursor()

    def kmsg_read(self, cursor: int) -> KernelLog:
        return self.agent.kmsg_read(cursor)

    def kmsg_close(self, cursor: int) -> None:
        self.agent.kmsg_close(cursor)


@pytest.fixture(scope="module")
def local_agent() -> Iterator[Agent]:
    """The real agent on this machine (root reads /dev/kmsg)."""
    with Agent.local() as agent:
        yield agent


def _kmsg(text: str) -> None:
    with open("/dev/kmsg", "w") as f:
        f.write(text + "\n")


def test_real_kernel_log_line_after_the_cursor_fails(local_agent: Agent) -> None:
    marker = uuid.uuid4().hex
    probes = {"here": KmsgOnly(local_agent)}
    _kmsg(f"hil-test {marker} WARNING: logged before the test")
    base = evidence.begin(probes)
    _kmsg(f"hil-test {marker} WARNING: logged during the test")
    result = evidence.finish(probes, base, SIW, settle_s=0.5)
    assert not result.ok
    text = result.to_text()
    assert f"{marker} WARNING: logged during the test" in text
    assert "logged before the test" not in text


def test_real_kernel_log_allowlisted_line_passes(local_agent: Agent) -> None:
    marker = uuid.uuid4().hex
    probes = {"here": KmsgOnly(local_agent)}
    base = evidence.begin(probes)
    _kmsg(f"hil-test {marker} WARNING: known harmless")
    result = evidence.finish(probes, base, SIW, settle_s=0.5, allow=(*DEFAULT_KERNEL_ALLOW, marker))
    assert result.ok, result.to_text()
