"""Before/after evidence on a pair's hosts: RDMA resource counts and the kernel log.

Invariant 11 of docs/contract.md needs, on each host, the count of every
RDMA resource type the kernel tracks (:data:`KINDS`: cm_id, qp, cq, mr, pd,
ctx, srq, each device's ``rdma resource show`` summary summed) before and
after a test (or a CM run) and every kernel log line logged in between.  A
type the host's summary does not list (an older kernel tracks no srq or ctx)
is not counted: :func:`not_counted` names it and the report says so, rather
than compare two zeros nobody read.  This is the one place that
takes them; the CM recording (:mod:`hil.cm.recording`), the after-test
checks of each test (:mod:`hil.run.testrun`)
all use it::

    base = begin(probes)                # probes: host name -> Agent (or any Probe)
    ...                                 # the test, or the run
    after = collect(probes, base)       # settle, then read and close the log cursors
    result = finish(probes, base, profile, allow)   # collect, then judge (hil.judge.checks)

Where the RDMA driver lists its objects itself (iw_cxgb4's debugfs ``qps``
and ``eps``, :func:`hil.host.hwevidence.counter`), those counts are
compared too: ``begin(probes, extra={host: counter})`` adds each host's
extra counts to its baseline, under kinds that name the file, and the
settle rule and the leak rule treat them like the ``rdma resource`` ones.

The settle rule, one for all of them: after a test, poll the counts every
:data:`POLL_S` until none is above its baseline, for at most :data:`SETTLE_S`
seconds.  Fewer than before is fine (a leftover of an earlier test went
away).  ``settle_s=0`` reads the counts once, as the test left them (the
report records that and leaves the waiting to the checks).

Why :data:`SETTLE_S` is 10 s (it was 10 s in the CM recording and 5 s in the
after-test checks): the wait ends at the first poll that finds the counts
back, so a clean test pays nothing for a long bound; only a test that still
holds something pays it, and there a bound that is too short reports a leak
that is not one.  The kernel releases RDMA resources asynchronously (the
ids of a worker that was SIGKILLed or has just exited go some time after the
process does, and an iWARP teardown waits on the provider), and TCG guests
on loaded cores are slow: the longer bound is the one that does not cry
wolf, and a real leak costs a failing test 5 s more.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from hil.agent.protocol import RESOURCE_TYPES
from hil.agent.types import KernelLog
from hil.judge.checks import AfterState, CheckResult, Known, assess
from hil.judge.expectations import DEFAULT_KERNEL_ALLOW
from hil.judge.profiles import Profiles
from hil.judge.timeline import KernelLogLine, ResourceCount

KINDS = RESOURCE_TYPES  # every type `rdma resource show`'s summary may list
SETTLE_S = 10.0  # how long resources may take to come back to the baseline (see above)
POLL_S = 0.25
P = TypeVar("P")
T = TypeVar("T")
# A host's extra counts (kind -> count), read again at every poll.
Counter = Callable[[], Mapping[str, int]]


class Probe(Protocol):
    """What the evidence needs of a host: the agent's resource and kernel-log calls."""

    def rdma_resources(
        self, types: Sequence[str] | None = None, timeout: float = ...
    ) -> dict[str, int]: ...
    def kmsg_cursor(self) -> int: ...
    def kmsg_read(self, cursor: int) -> KernelLog: ...
    def kmsg_close(self, cursor: int) -> None: ...


@dataclass(frozen=True)
class Baseline:
    """Each host's resource counts and kernel-log cursor before a test."""

    counts: Mapping[str, Mapping[str, int]]  # host -> kind -> count
    cursors: Mapping[str, int]  # host -> kmsg cursor
    extra: Mapping[str, Counter] = field(default_factory=dict)  # host -> its extra counts


def begin(probes: Mapping[str, Probe], extra: Mapping[str, Counter] | None = None) -> Baseline:
    """Record each host's resource counts and a kernel-log cursor at the current end.

    ``extra``: per host, more counts to hold to the same rule (the driver's
    own lists of its QPs and endpoints).
    """
    extra = dict(extra or {})
    # The cursors are taken while the counts are read (one round of calls, not two).
    with ThreadPoolExecutor(max_workers=1) as pool:
        cursors = pool.submit(each, probes, lambda p: p.kmsg_cursor())
        counts = _all_counts(probes, extra)
    return Baseline(counts, cursors.result(), extra)


def settle(
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
        now = _all_counts(probes, baseline.extra)
        counts = tuple(
            ResourceCount(host, kind, baseline.counts[host][kind], now[host][kind])
            for host in probes
            for kind in _kinds(baseline.counts[host], now[host])
        )
        waited = clock() - start
        if all(r.after <= r.before for r in counts) or waited >= settle_s:
            return counts, waited
        sleep(min(poll_s, max(0.0, settle_s - waited)))


def read_kernel_log(
    probes: Mapping[str, Probe], baseline: Baseline
) -> tuple[tuple[KernelLogLine, ...], dict[str, int]]:
    """Every kernel log line since the baseline's cursors (closed after), and records lost."""

    def read(host: str) -> KernelLog:
        probe, cursor = probes[host], baseline.cursors[host]
        try:
            return probe.kmsg_read(cursor)
        finally:
            probe.kmsg_close(cursor)

    logs = each({host: host for host in probes}, read)
    lines = tuple(KernelLogLine(host, m) for host, log in logs.items() for m in log.messages())
    return lines, {host: log.lost for host, log in logs.items()}


def collect(
    probes: Mapping[str, Probe], baseline: Baseline, settle_s: float = SETTLE_S
) -> AfterState:
    """Let the counts settle, then read the kernel log since the baseline (closing its cursors)."""
    resources, waited = settle(probes, baseline, settle_s)
    kernel_log, lost = read_kernel_log(probes, baseline)
    return AfterState(
        resources, kernel_log, lost, waited, not_counted=not_counted(probes, resources)
    )


def finish(
    probes: Mapping[str, Probe],
    baseline: Baseline,
    profile: Profiles,
    allow: Sequence[str] = DEFAULT_KERNEL_ALLOW,
    settle_s: float = SETTLE_S,
    known: Known | None = None,
) -> CheckResult:
    """The after-test checks: :func:`collect`, then judge it (:func:`hil.judge.checks.assess`;
    ``known``: the known kernel findings, reported apart)."""
    hosts = tuple(probes)
    pair = (hosts[0], hosts[-1])
    return assess(collect(probes, baseline, settle_s), profile, pair, allow, known)


def _all_counts(
    probes: Mapping[str, Probe], extra: Mapping[str, Counter]
) -> dict[str, dict[str, int]]:
    """Each host's ``rdma resource`` counts and its extra counts, all hosts at once."""

    def counts(host: str) -> dict[str, int]:
        more = extra.get(host)
        return {**probes[host].rdma_resources(KINDS), **(more() if more is not None else {})}

    return each({host: host for host in probes}, counts)


def not_counted(
    hosts: Iterable[str], resources: Iterable[ResourceCount]
) -> dict[str, tuple[str, ...]]:
    """Per host, the :data:`KINDS` its counts lack (its summary did not list them), if any."""
    counted: dict[str, set[str]] = {}
    for r in resources:
        counted.setdefault(r.host, set()).add(r.kind)
    missing = {h: tuple(k for k in KINDS if k not in counted.get(h, set())) for h in hosts}
    return {h: kinds for h, kinds in missing.items() if kinds}


def _kinds(before: Mapping[str, int], now: Mapping[str, int]) -> list[str]:
    """The kinds counted both before and now (:data:`KINDS` first, then the extra ones).

    A count that could not be read on one side (a type the host's ``rdma
    resource`` summary does not list, debugfs gone) has nothing to compare:
    it is left out rather than taken as 0 (:func:`not_counted` names the
    ``rdma resource`` ones).
    """
    return [k for k in before if k in now]


def each(items: Mapping[str, P], fn: Callable[[P], T]) -> dict[str, T]:
    """``fn`` on every host's item at once (guests are slow; hosts need not wait for each other)."""
    with ThreadPoolExecutor(max_workers=max(1, len(items))) as pool:
        futures = {host: pool.submit(fn, item) for host, item in items.items()}
        return {host: f.result() for host, f in futures.items()}
