"""The after-test checks' judgement (hil.judge.checks): resources back, kernel log clean.

The evidence is built by hand here; taking it from hosts is
tests/host/test_evidence.py.
"""

from __future__ import annotations

import pytest
from kernellines import HARMLESS, REPORTS, STILL_REPORTS

from hil.errors import InputError
from hil.judge import checks
from hil.judge.profiles import SIW
from hil.judge.timeline import KernelLogLine, ResourceCount

# The types a host's `rdma resource show` summary lists (hil.agent.protocol.RESOURCE_TYPES).
KINDS = ("cm_id", "qp", "cq", "mr", "pd", "ctx", "srq")


def _assess(
    log_a: tuple[str, ...] = (),
    log_b: tuple[str, ...] = (),
    lost: int = 0,
    counts_b: tuple[int, int] = (0, 0),
    **kw: object,
) -> checks.CheckResult:
    """Host ha (no change) and hb (its qp count ``counts_b`` before/after)."""
    resources = (
        *(ResourceCount("ha", k, 0, 0) for k in KINDS),
        ResourceCount("hb", "qp", *counts_b),
    )
    kernel_log = (
        *(KernelLogLine("ha", m) for m in log_a),
        *(KernelLogLine("hb", m) for m in log_b),
    )
    after = checks.AfterState(resources, kernel_log, {"ha": lost, "hb": 0}, 1.0)
    return checks.assess(after, SIW, ("ha", "hb"), **kw)  # type: ignore[arg-type]


def test_a_clean_state_passes_and_shows_every_count() -> None:
    result = _assess(log_b=("siw: device registered",))
    assert result.ok, result.to_text()
    assert result.verdict.rules == checks.RULES
    text = result.to_text()
    assert text.startswith("after-test checks PASSED (waited 1.0 s for resources)")
    assert "ha qp: 0 -> 0" in text and "siw: device registered" not in text


@pytest.mark.parametrize("kind", ["mr", "cq", "pd", "ctx", "srq"])
def test_a_leak_of_each_type_fails_naming_host_type_and_counts(kind: str) -> None:
    resources = tuple(ResourceCount("hb", k, 1, 2 if k == kind else 1) for k in KINDS)
    result = checks.assess(checks.AfterState(resources, (), {}, 1.0), SIW, ("ha", "hb"))
    assert [v.message for v in result.verdict.violations] == [
        f"hb holds 2 {kind} after the test, 1 before: 1 leaked"
    ]
    assert f"hb {kind}: 1 -> 2   <-- leaked" in result.to_text()


def test_the_same_counts_after_pass() -> None:
    resources = tuple(ResourceCount(h, k, 3, 3) for h in ("ha", "hb") for k in KINDS)
    result = checks.assess(checks.AfterState(resources, (), {}, 1.0), SIW, ("ha", "hb"))
    assert result.ok, result.to_text()


def test_types_not_counted_are_said_and_judge_nothing() -> None:
    resources = tuple(ResourceCount("hb", k, 0, 0) for k in KINDS[:5])
    after = checks.AfterState(resources, (), {}, 1.0, not_counted={"hb": ("ctx", "srq")})
    result = checks.assess(after, SIW, ("ha", "hb"))
    assert result.ok and result.not_counted == {"hb": ("ctx", "srq")}
    assert (
        "hb ctx, srq: not counted (its `rdma resource show` summary does not list them)"
        in result.to_text()
    )


def test_a_leak_fails_naming_host_and_kind_with_counts() -> None:
    result = _assess(counts_b=(2, 3))
    assert not result.ok
    text = result.to_text()
    assert "[resources-back-to-baseline]" in text
    assert "hb holds 3 qp after the test, 2 before: 1 leaked" in text
    assert "hb qp: 2 -> 3   <-- leaked" in text


@pytest.mark.parametrize(
    "line",
    [
        "WARNING: CPU: 0 PID: 12 at drivers/infiniband/core/iwcm.c:123 cm_work_handler",
        "BUG: KASAN: use-after-free in siw_cm_work_handler+0x1/0x2",
        "kernel BUG at drivers/infiniband/core/iwcm.c:400!",
        "Oops: general protection fault, probably for non-canonical address",
        "unreferenced object 0xffff888003a1c000 (size 256):",
        "WARNING: possible circular locking dependency detected",
        "INFO: trying to register non-static key.",
        "INFO: task kworker/0:1:12 blocked for more than 120 seconds.",
    ],
)
def test_bad_kernel_lines_fail_and_are_shown(line: str) -> None:
    result = _assess(log_b=("ok line", line))
    assert not result.ok
    text = result.to_text()
    assert "[kernel-log-clean]" in text and f"hb kernel log: {line}" in text
    assert "ok line" not in text


@pytest.mark.parametrize("line", [*REPORTS, *STILL_REPORTS])
def test_each_kernel_report_fails_and_is_shown(line: str) -> None:
    result = _assess(log_b=(line,))
    assert [v.message for v in result.verdict.violations] == [f"hb kernel log: {line}"]
    assert f"hb: {line}" in result.to_text()


@pytest.mark.parametrize("line", HARMLESS)
def test_lines_that_only_look_like_reports_pass(line: str) -> None:
    result = _assess(log_b=(line,))
    assert result.ok, result.to_text()


def test_an_allowed_report_passes_and_is_shown_as_allowed() -> None:
    line = "UBSAN: shift-out-of-bounds in net/ipv4/tcp_input.c:4051:31"  # lib/ubsan.c
    result = _assess(log_b=(line,), allow=checks.compile_allow([r"UBSAN: shift-out-of-bounds"]))
    assert result.ok, result.to_text()
    assert f"hb: {line}   (allowed)" in result.to_text()


def test_iwpmd_not_running_is_no_kernel_log_failure_and_needs_no_allowing() -> None:
    line = "iwpm_register_pid: Unable to send a nlmsg (client = 2)"  # pr_info, iwpm_msg.c
    result = _assess(log_a=(line,))
    assert result.ok, result.to_text()
    assert "(allowed)" not in result.to_text()


def test_custom_allowlist() -> None:
    log = ("WARNING: harmless thing 42", "INFO: task foo blocked for more than 120 seconds.")
    allow = checks.compile_allow([r"harmless thing \d+", r"task foo blocked"])
    result = _assess(log_a=log, allow=allow)
    assert result.ok, result.to_text()
    assert not _assess(log_a=log).ok


def test_bad_allow_pattern_is_an_input_error() -> None:
    with pytest.raises(InputError, match=r"'\(unclosed' is not a regular expression"):
        checks.compile_allow(["fine", "(unclosed"])


def test_lost_records_fail() -> None:
    result = _assess(lost=3)
    assert not result.ok
    assert "ha: 3 kernel log records were overwritten" in result.to_text()


def test_judge_reuses_the_contract_rules() -> None:
    res = (ResourceCount("x", "qp", 1, 2),)
    log = (KernelLogLine("y", "WARNING: at foo"),)
    verdict = checks.judge(res, log, {}, SIW, ("x", "y"))
    assert [v.rule for v in verdict.violations] == [
        "resources-back-to-baseline",
        "kernel-log-clean",
    ]
    assert all(v.invariant == 11 for v in verdict.violations)
