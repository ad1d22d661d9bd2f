"""After-test checks on a reserved pair: resources back to baseline, kernel log clean.

Invariant 11 of docs/contract.md.  Before a test, :func:`begin` records on
each host the counts of ``rdma resource show cm_id|qp|cq|mr`` and a kernel
log cursor.  After it, :func:`finish` waits (bounded: ``rdma_destroy_id`` and
the provider's teardown are asynchronous) for the counts to come back to the
baseline, reads the kernel log since the cursor, and judges both with the
contract's own rules ``resources-back-to-baseline`` and ``kernel-log-clean``
(:mod:`hil.judge.expectations`).  The result carries the evidence: every count
before and after, per host and kind, and the offending kernel lines.

    base = begin(probes)             # probes: host name -> Agent
    ...                              # the test
    result = finish(probes, base, profile)
    assert result.ok, result.to_text()
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Protocol, TypeVar

from hil.agent.types import KernelLog
from hil.errors import InputError
from hil.judge.contract import Verdict, Violation, check, rule_named
from hil.judge.expectations import BAD_KERNEL_LINE, DEFAULT_KERNEL_ALLOW, kernel_log_clean
from hil.judge.profiles import Profile
from hil.judge.timeline import KernelLogLine, ResourceCount, Timeline

KINDS = ("cm_id", "qp", "cq", "mr")
SETTLE_S = 5.0  # how long resources may take to return to the baseline
POLL_S = 0.25
# Lockdep and hung-task reports that the contract rule's pattern does not
# catch: their first line starts "INFO:" (e.g. "INFO: trying to register
# non-static key", "INFO: task x blocked for more than 120 seconds").
LOCKDEP_INFO = re.compile(r"^INFO: |possible circular locking|possible recursive locking")
RULES = ("resources-back-to-baseline", "kernel-log-clean")
T = TypeVar("T")


class Probe(Protocol):
    """What the checks need of a host: the agent's resource and kernel-log calls."""

    def rdma_resources(self, types: Sequence[str] | None = None,
                       timeout: float = ...) -> dict[str, int]: ...
    def kmsg_cursor(self) -> int: ...
    def kmsg_read(self, cursor: int) -> KernelLog: ...
    def kmsg_close(self, cursor: int) -> None: ...


@dataclass(frozen=True)
class Baseline:
    """Each host's resource counts and kernel-log cursor before a test."""

    counts: Mapping[str, Mapping[str, int]]  # host -> kind -> count
    cursors: Mapping[str, int]  # host -> kmsg cursor


@dataclass(frozen=True)
class CheckResult:
    """The after-test evidence and the verdict of the two rules on it."""

    resources: tuple[ResourceCount, ...]
    kernel_log: tuple[KernelLogLine, ...]
    lost: Mapping[str, int]  # host -> kernel log records overwritten before we read them
    waited_s: float
    allow: tuple[str, ...]
    verdict: Verdict

    @property
    def ok(self) -> bool:
        """True when both rules hold."""
        return self.verdict.ok

    def to_text(self) -> str:
        """The verdict, then every count before/after, then the kernel lines read."""
        head = (f"after-test checks {'PASSED' if self.ok else 'FAILED'} "
                f"(waited {self.waited_s:.1f} s for resources)")
        lines = [head]
        lines += [f"    {v}" for v in self.verdict.to_text().splitlines()[1:]]
        lines.append("    resources (host kind: before -> after):")
        lines += [f"      {r.host} {r.kind}: {r.before} -> {r.after}"
                  + ("   <-- leaked" if r.after > r.before else "") for r in self.resources]
        flagged = [k for k in self.kernel_log if _matches_bad(k.line)]
        if flagged:
            lines.append("    kernel log lines matching a bad pattern:")
            lines += [f"      {k.host}: {k.line}"
                      + ("   (allowed)" if _allowed(k.line, self.allow) else "") for k in flagged]
        return "\n".join(lines)


def compile_allow(patterns: Sequence[str]) -> tuple[str, ...]:
    """Check each allowlist regex compiles; ``InputError`` names the bad one."""
    for p in patterns:
        try:
            re.compile(p)
        except re.error as e:
            raise InputError(f"kernel log allow pattern {p!r} is not a regular expression: {e}"
                             ) from None
    return tuple(patterns)


def begin(probes: Mapping[str, Probe]) -> Baseline:
    """Record each host's resource counts and a kernel-log cursor at the current end."""
    counts = _each(probes, _counts)
    cursors = _each(probes, lambda p: p.kmsg_cursor())
    return Baseline(counts, cursors)


def wait_back_to_baseline(
    probes: Mapping[str, Probe],
    baseline: Baseline,
    settle_s: float = SETTLE_S,
    poll_s: float = POLL_S,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> tuple[tuple[ResourceCount, ...], float]:
    """Poll the counts until none is above its baseline, or ``settle_s`` passed.

    Returns the last counts and how long it waited.
    """
    start = clock()
    while True:
        now = _each(probes, _counts)
        counts = tuple(
            ResourceCount(host, kind, baseline.counts[host].get(kind, 0), now[host].get(kind, 0))
            for host in probes for kind in KINDS
        )
        waited = clock() - start
        if all(r.after <= r.before for r in counts) or waited >= settle_s:
            return counts, waited
        sleep(min(poll_s, max(0.0, settle_s - waited)))


def read_kernel_log(probes: Mapping[str, Probe], baseline: Baseline
                    ) -> tuple[tuple[KernelLogLine, ...], dict[str, int]]:
    """Every kernel log line since the baseline's cursors (closed after), and records lost."""
    def read(host: str) -> KernelLog:
        probe, cursor = probes[host], baseline.cursors[host]
        try:
            return probe.kmsg_read(cursor)
        finally:
            probe.kmsg_close(cursor)

    with ThreadPoolExecutor(max_workers=max(1, len(probes))) as pool:
        logs = dict(zip(probes, pool.map(read, probes), strict=True))
    lines = tuple(KernelLogLine(host, m) for host, log in logs.items() for m in log.messages())
    return lines, {host: log.lost for host, log in logs.items()}


def judge(resources: tuple[ResourceCount, ...], kernel_log: tuple[KernelLogLine, ...],
          lost: Mapping[str, int], profile: Profile, pair: tuple[str, str],
          allow: Sequence[str] = DEFAULT_KERNEL_ALLOW) -> Verdict:
    """The contract's two after-test rules on this evidence, plus what they cannot see.

    Beyond the rules: lockdep / hung-task "INFO:" reports, and kernel log
    records overwritten before they were read (a bad line may be among them).
    """
    tl = Timeline("after-test", profile.name, pair, resources=resources, kernel_log=kernel_log)
    rules = (rule_named("resources-back-to-baseline"), kernel_log_clean(allow))
    base = check(tl, profile, rules)
    extra = [
        Violation("kernel-log-clean", profile.name, f"{k.host} kernel log: {k.line.strip()}",
                  invariant=11)
        for k in kernel_log if LOCKDEP_INFO.search(k.line)
        and not BAD_KERNEL_LINE.search(k.line) and not _allowed(k.line, allow)
    ]
    extra += [
        Violation("kernel-log-clean", profile.name,
                  f"{host}: {n} kernel log records were overwritten before they were read; "
                  "a bad line may be among them (raise log_buf_len or log less)", invariant=11)
        for host, n in lost.items() if n
    ]
    return Verdict("after-test", profile.name, RULES, base.violations + tuple(extra))


def finish(probes: Mapping[str, Probe], baseline: Baseline, profile: Profile,
           allow: Sequence[str] = DEFAULT_KERNEL_ALLOW, settle_s: float = SETTLE_S
           ) -> CheckResult:
    """Wait for the resources to settle, read the kernel log, judge both."""
    resources, waited = wait_back_to_baseline(probes, baseline, settle_s)
    kernel_log, lost = read_kernel_log(probes, baseline)
    pair = tuple(probes)
    verdict = judge(resources, kernel_log, lost, profile, (pair[0], pair[-1]), allow)
    return CheckResult(resources, kernel_log, lost, waited, tuple(allow), verdict)


def _counts(probe: Probe) -> dict[str, int]:
    return probe.rdma_resources(KINDS)


def _each(probes: Mapping[str, Probe], fn: Callable[[Probe], T]) -> dict[str, T]:
    """``fn`` on every host at once (guests are slow; hosts need not wait for each other)."""
    with ThreadPoolExecutor(max_workers=max(1, len(probes))) as pool:
        futures = {host: pool.submit(fn, p) for host, p in probes.items()}
        return {host: f.result() for host, f in futures.items()}


def _matches_bad(line: str) -> bool:
    return bool(BAD_KERNEL_LINE.search(line) or LOCKDEP_INFO.search(line))


def _allowed(line: str, allow: Sequence[str]) -> bool:
    return any(re.search(p, line) for p in allow)
