"""The after-test checks' judgement: resources back to baseline, kernel log clean.

Invariant 11 of docs/contract.md, judged with the contract's own rules
``resources-back-to-baseline`` and ``kernel-log-clean``
(:mod:`hil.judge.expectations`, whose ``KERNEL_REPORTS`` are the kernel log
lines that fail), plus what they cannot see: kernel log records overwritten
before they were read.  A report that is a known kernel finding of this test
(:mod:`hil.judge.known`) is told apart: kept in the result, not judged.
This module only judges what it is given; taking the evidence from the hosts
(baseline, settle wait, kernel-log cursor) is :mod:`hil.host.evidence`, whose
``finish`` ends in :func:`assess`::

    after = AfterState(resources, kernel_log, lost, waited_s)
    result = assess(after, profile, ("host-a", "host-b"))
    assert result.ok, result.to_text()
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from hil.errors import InputError
from hil.judge.contract import Verdict, Violation, check, rule_named
from hil.judge.expectations import BAD_KERNEL_LINE, DEFAULT_KERNEL_ALLOW, kernel_log_clean
from hil.judge.known import KnownFinding, Match, explain
from hil.judge.profiles import Profiles
from hil.judge.timeline import KernelLogLine, ResourceCount, Timeline

# Where a kernel report begins (hil.judge.known): a line the kernel-log rule fails.
REPORT_START = BAD_KERNEL_LINE
RULES = ("resources-back-to-baseline", "kernel-log-clean")


@dataclass(frozen=True)
class Known:
    """The known kernel findings, and the test and kernel releases they are judged for."""

    findings: tuple[KnownFinding, ...]
    test: str  # the pytest node id
    releases: tuple[str, ...]  # the pair's kernels (uname -r)
    anywhere: bool = False  # every entry known on these kernels, whatever its tests (fuzz)


@dataclass(frozen=True)
class AfterState:
    """What the hosts showed after a test: counts before/after, kernel lines, records lost,
    and the resource types a host could not count (its ``rdma resource`` summary lacks them)."""

    resources: tuple[ResourceCount, ...]
    kernel_log: tuple[KernelLogLine, ...]
    lost: Mapping[str, int]  # host -> kernel log records overwritten before we read them
    waited_s: float  # how long the counts were given to come back
    # host -> the types it could not count: said in the report, neither passed nor failed
    not_counted: Mapping[str, tuple[str, ...]] = field(default_factory=dict, kw_only=True)


@dataclass(frozen=True)
class CheckResult(AfterState):
    """The after-test evidence and the verdict of the two rules on it."""

    allow: tuple[str, ...]
    verdict: Verdict
    known: tuple[Match, ...] = ()  # known findings of this test: reported apart, not judged
    elsewhere: tuple[Match, ...] = ()  # known findings whose entry does not name this test

    @property
    def ok(self) -> bool:
        """True when both rules hold."""
        return self.verdict.ok

    def to_text(self) -> str:
        """The verdict, then every count before/after, then the kernel lines read."""
        head = (
            f"after-test checks {'PASSED' if self.ok else 'FAILED'} "
            f"(waited {self.waited_s:.1f} s for resources)"
        )
        lines = [head]
        lines += [f"    {v}" for v in self.verdict.to_text().splitlines()[1:]]
        lines.append("    resources (host kind: before -> after):")
        lines += [
            f"      {r.host} {r.kind}: {r.before} -> {r.after}"
            + ("   <-- leaked" if r.after > r.before else "")
            for r in self.resources
        ]
        lines += [
            f"      {host} {', '.join(kinds)}: not counted (its `rdma resource show` summary "
            "does not list them)"
            for host, kinds in self.not_counted.items()
        ]
        excused = {id(k) for m in self.known for k in m.report.lines}
        lines += [f"    {m.line()}: reported apart, not judged" for m in self.known]
        lines += [
            f"    {m.report.host}: {m.report.title}: this is known kernel finding "
            f"{m.finding.id}, but not in this test or kernel (its tests: "
            f"{', '.join(m.finding.tests)}; kernels: {', '.join(m.finding.kernels)}); "
            "widen its entry if it is the same bug"
            for m in self.elsewhere
        ]
        flagged = [
            k for k in self.kernel_log if BAD_KERNEL_LINE.search(k.line) and id(k) not in excused
        ]
        if flagged:
            lines.append("    kernel log lines matching a bad pattern:")
            lines += [
                f"      {k.host}: {k.line}"
                + ("   (allowed)" if _allowed(k.line, self.allow) else "")
                for k in flagged
            ]
        return "\n".join(lines)


def compile_allow(patterns: Sequence[str]) -> tuple[str, ...]:
    """Check each allowlist regex compiles; ``InputError`` names the bad one."""
    for p in patterns:
        try:
            re.compile(p)
        except re.error as e:
            raise InputError(
                f"kernel log allow pattern {p!r} is not a regular expression: {e}"
            ) from None
    return tuple(patterns)


def judge(
    resources: tuple[ResourceCount, ...],
    kernel_log: tuple[KernelLogLine, ...],
    lost: Mapping[str, int],
    profile: Profiles,
    pair: tuple[str, str],
    allow: Sequence[str] = DEFAULT_KERNEL_ALLOW,
) -> Verdict:
    """The contract's two after-test rules on this evidence, plus what they cannot see:
    kernel log records overwritten before they were read (a bad line may be among them).
    """
    tl = Timeline("after-test", profile.name, pair, resources=resources, kernel_log=kernel_log)
    rules = (rule_named("resources-back-to-baseline"), kernel_log_clean(allow))
    base = check(tl, profile, rules)
    extra = [
        Violation(
            "kernel-log-clean",
            profile.name,
            f"{host}: {n} kernel log records were overwritten before they were read; "
            "a bad line may be among them (raise log_buf_len or log less)",
            invariant=11,
        )
        for host, n in lost.items()
        if n
    ]
    return Verdict("after-test", profile.name, RULES, base.violations + tuple(extra))


def assess(
    after: AfterState,
    profile: Profiles,
    pair: tuple[str, str],
    allow: Sequence[str] = DEFAULT_KERNEL_ALLOW,
    known: Known | None = None,
) -> CheckResult:
    """:func:`judge` on ``after``, with the evidence it judged; the reports that are
    ``known`` findings of the test are taken out of the log it judges first."""
    told = explain(
        after.kernel_log,
        known.findings if known else (),
        REPORT_START,
        known.test if known else "",
        known.releases if known else (),
        anywhere=known.anywhere if known else False,
    )
    verdict = judge(after.resources, told.rest, after.lost, profile, pair, allow)
    return CheckResult(
        after.resources,
        after.kernel_log,
        after.lost,
        after.waited_s,
        tuple(allow),
        verdict,
        told.known,
        told.elsewhere,
        not_counted=after.not_counted,
    )


def _allowed(line: str, allow: Sequence[str]) -> bool:
    return any(re.search(p, line) for p in allow)
