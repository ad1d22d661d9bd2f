"""The after-test checks (hil.checks): resources back to baseline, kernel log clean.

Fake probes stand in for the agents' resource counts; the kernel-log part
also runs against the real agent and the real /dev/kmsg of this machine
(the suites run the whole check against the virtual lab's guests).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from hil import checks
from hil.agent import Agent
from hil.agent.types import KernelLog, KmsgRecord
from hil.errors import InputError
from hil.judge.profiles import SIW
from hil.judge.timeline import KernelLogLine, ResourceCount

pytest_plugins = ["pytester"]


class FakeProbe:
    """Counts that step through ``series`` on each call; a canned kernel log."""

    def __init__(self, series: Sequence[dict[str, int]], log: Sequence[str] = (),
                 lost: int = 0) -> None:
        self.series = list(series)
        self.log = list(log)
        self.lost = lost
        self.closed: list[int] = []

    def rdma_resources(self, types: Sequence[str] | None = None,
                       timeout: float = 30.0) -> dict[str, int]:
        counts = self.series[0] if len(self.series) == 1 else self.series.pop(0)
        return {t: counts.get(t, 0) for t in (types or checks.KINDS)}

    def kmsg_cursor(self) -> int:
        return 7

    def kmsg_read(self, cursor: int) -> KernelLog:
        records = tuple(KmsgRecord(i, i, 4, 0, m) for i, m in enumerate(self.log))
        return KernelLog(records, self.lost)

    def kmsg_close(self, cursor: int) -> None:
        self.closed.append(cursor)


def _zero() -> dict[str, int]:
    return dict.fromkeys(checks.KINDS, 0)


def _run(a: FakeProbe, b: FakeProbe, **kw: object) -> checks.CheckResult:
    probes = {"ha": a, "hb": b}
    base = checks.begin(probes)
    return checks.finish(probes, base, SIW, settle_s=kw.pop("settle_s", 1.0), **kw)  # type: ignore[arg-type]


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


def test_fewer_resources_than_before_is_fine() -> None:
    b = FakeProbe([{**_zero(), "qp": 2}, _zero()])
    assert _run(FakeProbe([_zero()]), b).ok


@pytest.mark.parametrize("line", [
    "WARNING: CPU: 0 PID: 12 at drivers/infiniband/core/iwcm.c:123 cm_work_handler",
    "BUG: KASAN: use-after-free in siw_cm_work_handler+0x1/0x2",
    "kernel BUG at drivers/infiniband/core/iwcm.c:400!",
    "Oops: general protection fault, probably for non-canonical address",
    "unreferenced object 0xffff888003a1c000 (size 256):",
    "WARNING: possible circular locking dependency detected",
    "INFO: trying to register non-static key.",
    "INFO: task kworker/0:1:12 blocked for more than 120 seconds.",
])
def test_bad_kernel_lines_fail_and_are_shown(line: str) -> None:
    result = _run(FakeProbe([_zero()]), FakeProbe([_zero()], log=["ok line", line]))
    assert not result.ok
    text = result.to_text()
    assert "[kernel-log-clean]" in text and f"hb kernel log: {line}" in text
    assert "ok line" not in text


def test_default_allowlist_lets_iwpm_through() -> None:
    line = "iwpm_register_pid: Unable to send a nlmsg (client = 2) WARNING"
    result = _run(FakeProbe([_zero()], log=[line]), FakeProbe([_zero()]))
    assert result.ok, result.to_text()
    assert "(allowed)" in result.to_text()


def test_custom_allowlist() -> None:
    log = ["WARNING: harmless thing 42", "INFO: task foo blocked for more than 120 seconds."]
    allow = checks.compile_allow([r"harmless thing \d+", r"task foo blocked"])
    result = _run(FakeProbe([_zero()], log=log), FakeProbe([_zero()]), allow=allow)
    assert result.ok, result.to_text()
    assert not _run(FakeProbe([_zero()], log=log), FakeProbe([_zero()])).ok


def test_bad_allow_pattern_is_an_input_error() -> None:
    with pytest.raises(InputError, match=r"'\(unclosed' is not a regular expression"):
        checks.compile_allow(["fine", "(unclosed"])


def test_lost_records_fail() -> None:
    result = _run(FakeProbe([_zero()], lost=3), FakeProbe([_zero()]))
    assert not result.ok
    assert "ha: 3 kernel log records were overwritten" in result.to_text()


def test_judge_reuses_the_contract_rules() -> None:
    res = (ResourceCount("x", "qp", 1, 2),)
    log = (KernelLogLine("y", "WARNING: at foo"),)
    verdict = checks.judge(res, log, {}, SIW, ("x", "y"))
    assert [v.rule for v in verdict.violations] == ["resources-back-to-baseline",
                                                     "kernel-log-clean"]
    assert all(v.invariant == 11 for v in verdict.violations)


def test_wait_is_bounded_with_a_fake_clock() -> None:
    now = [0.0]
    slept: list[float] = []

    def sleep(s: float) -> None:
        slept.append(s)
        now[0] += s

    probe = FakeProbe([{**_zero(), "qp": 1}])
    base = checks.Baseline({"h": _zero()}, {"h": 1})
    counts, waited = checks.wait_back_to_baseline({"h": probe}, base, settle_s=2.0,
                                                  poll_s=0.5, clock=lambda: now[0], sleep=sleep)
    assert waited == 2.0 and slept == [0.5, 0.5, 0.5, 0.5]
    assert ResourceCount("h", "qp", 0, 1) in counts


class KmsgOnly:
    """The real agent's kernel log with fixed resource counts (this host has no RDMA)."""

    def __init__(self, agent: Agent) -> None:
        self.agent = agent

    def rdma_resources(self, types: Sequence[str] | None = None,
                       timeout: float = 30.0) -> dict[str, int]:
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
    base = checks.begin(probes)
    _kmsg(f"hil-test {marker} WARNING: logged during the test")
    result = checks.finish(probes, base, SIW, settle_s=0.5)
    assert not result.ok
    text = result.to_text()
    assert f"{marker} WARNING: logged during the test" in text
    assert "logged before the test" not in text


def test_real_kernel_log_allowlisted_line_passes(local_agent: Agent) -> None:
    marker = uuid.uuid4().hex
    probes = {"here": KmsgOnly(local_agent)}
    base = checks.begin(probes)
    _kmsg(f"hil-test {marker} WARNING: known harmless")
    result = checks.finish(probes, base, SIW, settle_s=0.5,
                           allow=(*checks.DEFAULT_KERNEL_ALLOW, marker))
    assert result.ok, result.to_text()


# -- the suites' pytest wiring (suites/conftest.py), without a lab ---------------

SUITES = Path(__file__).resolve().parent.parent / "suites"


@pytest.fixture
def suite_dir(pytester: pytest.Pytester) -> pytest.Pytester:
    """A pytest dir holding the suites' conftest and helpers, and one test on the pair."""
    for name in ("conftest.py", "cmsuite.py"):
        (pytester.path / name).write_text((SUITES / name).read_text())
    pytester.makepyfile(test_one="""
        import pytest

        @pytest.mark.disruptive
        def test_on_pair(cm, contract):
            pass
    """)
    return pytester


def test_suites_bad_allow_pattern_is_a_one_line_usage_error(suite_dir: pytest.Pytester) -> None:
    result = suite_dir.runpytest_subprocess("--hil-kmsg-allow", "(oops", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*kernel log allow pattern '(oops' is not a regular expression*"])
    assert "Traceback" not in result.stderr.str()


def test_suites_without_inventory_skip_saying_how_to_run(suite_dir: pytest.Pytester) -> None:
    result = suite_dir.runpytest_subprocess("--strict-markers", "-rs", "-p", "no:cacheprovider")
    result.assert_outcomes(skipped=2)  # one per direction
    result.stdout.fnmatch_lines(["*no lab inventory: pass --hil-inventory FILE*"])
