"""The fuzzer's engine: seeded mutations of scenarios, the case loop, progress and findings.

Case ``n`` of seed ``s`` is a pure function of ``(s, n)`` and the scenarios
given: its random generator is seeded by both, so ``hil peer fuzz --seed s``
makes the same cases on every host and run, and one case is made again alone
from its number.  A case picks one scenario and applies 1 to
:data:`MAX_MUTATIONS` mutations, each of one kind (:data:`KINDS`):

- ``value``: a field of a sent frame set to a random value of its type;
- ``boundary``: a field set to an edge of its range or a value an RFC makes
  special (PD_Length 512 and 513, a reserved opcode, CRC "bad", ...);
- ``length``: a length field (PD_Length, ULPDU_Length, size, DDP segment
  length) set to an edge or one off its current value;
- ``truncate``: only the first bytes of a send step written, never the rest;
- ``duplicate``: a send step sent twice;
- ``reorder``: two send steps of one connection swapped;
- ``segment``: a send step written in 1-byte or random segments, or
  coalesced with the next send.

Every value comes from :mod:`hil.peer.vocab`, so a case is a valid scenario
and its replay file loads again.  :func:`fuzz` runs the cases through a
``fails(scenario) -> bool`` callable (the runner: the case on the DUT, then the
DUT's kernel log, leaks and a normal connect), shrinks each failing one
(:mod:`hil.peer.shrink`) and reports progress and findings as they come.  ``fails``
raises :class:`Interrupted` for a case the run's stop cut short: that case is no
finding; a case that failed before, cut short while being shrunk, is kept whole.

**kmemleak once per batch** (:class:`LeakScans`, ``hil peer fuzz --leak-scan-every K``).
A kmemleak scan takes 30-55 s in a TCG guest with KASAN (hil/host/kmemleak.py), five to
ten times a case.  With ``scans`` a case runs without one (its kernel log, resources
and normal connect are still checked after it, so a KASAN, lockdep or WARNING line is
still the case's own), and the DUT is scanned after every ``every`` cases, after a case
that failed otherwise, and after the last case.  A leak is never lost by this: kmemleak
reports every unreferenced object older than its minimum age at the next scan, whenever
that is (mm/kmemleak.c, kmemleak_scan()).  Only who caused it is unknown, so a batch
whose scan reports a leak is run again, each case alone with a scan after it (as
without batches): each case that leaks alone is a finding, shrunk with a scan after
every try.  When none does (a leak that needs two cases, or one that came only once),
the finding is the batch: each case's replay file is saved and the batch's report kept
(:attr:`Finding.batch`).  Rerunning costs a scan per case of the batch, but only for a
batch that leaked; a finding's shrink scans after every try, as before.
"""

from __future__ import annotations

import random
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Literal, get_args

from hil.errors import InputError
from hil.peer.scenario import Dut, Expect, Scenario, Send, Step
from hil.peer.shrink import Shrunk, shrink
from hil.peer.vocab import FIELDS, Field, Value

MutationKind = Literal["value", "boundary", "length", "truncate", "duplicate", "reorder", "segment"]
KINDS: tuple[MutationKind, ...] = get_args(MutationKind)
MAX_MUTATIONS = 3
MAX_TRUNCATE = 31  # bytes: within an MPA request's 20-byte header or an FPDU's first header
Steps = tuple[Step, ...]
Applied = tuple[Steps, int, str]  # the new steps, the step changed (0-based), what was done


class Interrupted(Exception):
    """The run was stopped (Ctrl-C, SIGTERM, its deadline) while a case ran: that run of
    the case shows nothing about the DUT."""


class Crashed(Exception):
    """A case crashed a host of the pair: no case can run until the host is recovered."""

    def __init__(self, scenario: Scenario) -> None:
        super().__init__(scenario.name)
        self.scenario = scenario


@dataclass(frozen=True)
class Mutation:
    """One change a case made: its kind, the step (counted from 1) and what it did."""

    kind: MutationKind
    step: int
    detail: str

    def __str__(self) -> str:
        return f"{self.kind} at step {self.step}: {self.detail}"


@dataclass(frozen=True)
class Case:
    """Case ``number`` of ``seed``: the scenario ``base`` mutated into ``scenario``."""

    seed: int
    number: int
    base: str
    scenario: Scenario
    mutations: tuple[Mutation, ...]


def make_case(scenarios: Sequence[Scenario], seed: int, number: int) -> Case:
    """Case ``number`` of ``seed`` (the same for the same arguments, anywhere)."""
    if not scenarios:
        raise InputError("the fuzzer needs at least one scenario to mutate")
    rng = random.Random(f"hil-peer-fuzz:{seed}:{number}")
    base = scenarios[rng.randrange(len(scenarios))]
    scenario, done = base, []
    for _ in range(rng.randint(1, MAX_MUTATIONS)):
        applied = mutate(rng, scenario)
        if applied is not None:
            scenario, mutation = applied
            done.append(mutation)
    named = replace(scenario, name=f"{base.name}-fuzz-{seed}-{number}")
    return Case(seed, number, base.name, named, tuple(done))


def mutate(
    rng: random.Random, scenario: Scenario, kind: MutationKind | None = None
) -> tuple[Scenario, Mutation] | None:
    """One mutation of ``kind`` (default: a random kind that applies); None if none applies."""
    kinds = [kind] if kind else rng.sample(KINDS, len(KINDS))
    for k in kinds:
        applied = _MUTATORS[k](rng, scenario.steps)
        if applied is not None:
            steps, index, detail = applied
            return replace(scenario, steps=steps), Mutation(k, index + 1, detail)
    return None


def _pick_send(rng: random.Random, steps: Steps) -> tuple[int, Send] | None:
    """A random send step whose frame has fields (not a bare close), and its index."""
    framed = [(i, s) for i, s in enumerate(steps) if isinstance(s, Send) and FIELDS[s.frame]]
    return rng.choice(framed) if framed else None


def _with(steps: Steps, index: int, step: Step) -> Steps:
    return (*steps[:index], step, *steps[index + 1 :])


def _set_field(
    rng: random.Random, steps: Steps, pick: Callable[[Field], Value | None]
) -> Applied | None:
    """A field of a random framed send set to ``pick(field)`` (None: the field does not fit)."""
    picked = _pick_send(rng, steps)
    if picked is None:
        return None
    index, send = picked
    candidates = [f for f in FIELDS[send.frame].values() if pick(f) is not None]
    if not candidates:
        return None
    field = rng.choice(candidates)
    value = pick(field)
    assert value is not None
    fields = (*((n, v) for n, v in send.fields if n != field.name), (field.name, value))
    return _with(steps, index, replace(send, fields=fields)), index, f"{field.name}={value!r}"


def _value(rng: random.Random, steps: Steps) -> Applied | None:
    return _set_field(rng, steps, lambda f: f.draw(rng))


def _boundary(rng: random.Random, steps: Steps) -> Applied | None:
    return _set_field(rng, steps, lambda f: rng.choice(f.boundaries()))


def _length(rng: random.Random, steps: Steps) -> Applied | None:
    def pick(field: Field) -> Value | None:
        if not field.length:
            return None
        near = [n for n in _lengths_near(steps, field.name) if 0 <= n <= field.high]
        return rng.choice([*field.boundaries(), *near])

    return _set_field(rng, steps, pick)


def _lengths_near(steps: Steps, name: str) -> list[int]:
    """One off each value a send step gives ``name`` now."""
    given = [v for s in steps if isinstance(s, Send) for n, v in s.fields if n == name]
    return [v + d for v in given if isinstance(v, int) for d in (-1, 1)]


def _truncate(rng: random.Random, steps: Steps) -> Applied | None:
    picked = _pick_send(rng, steps)
    if picked is None:
        return None
    index, send = picked
    cut = rng.randint(0, MAX_TRUNCATE)
    return _with(steps, index, replace(send, truncate=cut)), index, f"truncate={cut}"


def _duplicate(rng: random.Random, steps: Steps) -> Applied | None:
    sends = [i for i, s in enumerate(steps) if isinstance(s, Send)]
    if not sends:
        return None
    index = rng.choice(sends)
    return (*steps[: index + 1], *steps[index:]), index, "sent twice"


def _reorder(rng: random.Random, steps: Steps) -> Applied | None:
    pairs = [(a, b) for run in _connections(steps) for a in run for b in run if a < b]
    if not pairs:
        return None
    a, b = rng.choice(pairs)
    swapped = list(steps)
    swapped[a], swapped[b] = steps[b], steps[a]
    return tuple(swapped), a, f"swapped with step {b + 1}"


def _connections(steps: Steps) -> list[list[int]]:
    """The send steps of each connection: a close (sent, expected or the DUT's) ends one and
    stays where it is; so does a ``reg_mr``, so that no send naming the DUT's region
    (``{dut: stag}``) moves before the step that registers it."""
    runs: list[list[int]] = [[]]
    for i, step in enumerate(steps):
        if _closes(step) or (isinstance(step, Dut) and step.action == "reg_mr"):
            runs.append([])
        elif isinstance(step, Send):
            runs[-1].append(i)
    return runs


def _closes(step: Step) -> bool:
    if isinstance(step, Send | Expect):
        return step.frame in ("fin", "rst", "close")
    return isinstance(step, Dut) and step.action == "close"


def _segment(rng: random.Random, steps: Steps) -> Applied | None:
    picked = _pick_send(rng, steps)
    if picked is None:
        return None
    index, send = picked
    later = any(isinstance(s, Send) for s in steps[index + 1 :])
    way = rng.choice(("one-byte", "random", "coalesce") if later else ("one-byte", "random"))
    if way == "coalesce":
        return _with(steps, index, replace(send, coalesce_with_next=True)), index, "coalesced"
    if way == "one-byte":
        sizes = (1,) * rng.randint(1, 32)
    else:
        sizes = tuple(rng.randint(1, 16) for _ in range(rng.randint(1, 8)))
    return _with(steps, index, replace(send, segments=sizes)), index, f"segments={list(sizes)}"


_MUTATORS: dict[MutationKind, Callable[[random.Random, Steps], Applied | None]] = {
    "value": _value,
    "boundary": _boundary,
    "length": _length,
    "truncate": _truncate,
    "duplicate": _duplicate,
    "reorder": _reorder,
    "segment": _segment,
}


@dataclass(frozen=True)
class Progress:
    """Where a run is: cases done of ``total``, findings so far, seconds since it began."""

    cases: int
    total: int
    findings: int
    elapsed_s: float
    crashes: int = 0  # hosts crashed by a case and recovered
    not_run: int = 0  # cases that send a known crash's trigger

    @property
    def rate(self) -> float:
        """Cases per second (0 before the first second's worth of clock)."""
        return self.cases / self.elapsed_s if self.elapsed_s > 0 else 0.0

    def __str__(self) -> str:
        text = f"{self.cases}/{self.total} cases, {self.rate:.2f} cases/s, {self.findings} findings"
        text += f", {self.crashes} crashes recovered" if self.crashes else ""
        return text + (f", {self.not_run} not run (known crash triggers)" if self.not_run else "")


@dataclass(frozen=True)
class Finding:
    """A failing case and its shrunk replay (``shrunk.reproduced`` False: it failed only
    once); or, with ``batch``, the cases of a batch whose kmemleak scan reported ``leak``
    when none of them leaked again alone (``case`` is the batch's last)."""

    case: Case
    shrunk: Shrunk
    batch: tuple[Case, ...] = ()
    leak: str = ""


@dataclass(frozen=True)
class LeakScans:
    """kmemleak scanned once per ``every`` cases (module doc): ``unscanned`` runs a case
    as ``fails`` does but without a scan after it; ``scan`` scans now and gives the new
    leaks' report ('' when none)."""

    every: int
    unscanned: Callable[[Scenario], bool]
    scan: Callable[[], str]


@dataclass(frozen=True)
class Report:
    """A run's end: its last progress and every finding, in case order."""

    progress: Progress
    findings: tuple[Finding, ...]


def fuzz(
    scenarios: Sequence[Scenario],
    fails: Callable[[Scenario], bool],
    *,
    seed: int,
    cases: int,
    first: int = 0,
    scans: LeakScans | None = None,
    recover: Callable[[Crashed], bool] | None = None,
    not_run: Callable[[Case], bool] = lambda c: False,
    on_progress: Callable[[Progress], None] = lambda p: None,
    on_finding: Callable[[Finding], None] = lambda f: None,
    clock: Callable[[], float] = time.monotonic,
) -> Report:
    """Run cases ``first`` .. ``first + cases - 1`` of ``seed``; shrink each one that fails.
    ``fails`` runs a case with every check after it (kmemleak too); with ``scans``, cases
    run without their own kmemleak scan, one scan a batch (module doc).  A case that
    crashes a host raises :class:`Crashed` from ``fails``: ``recover`` reports it and gets
    the pair back (True: the run goes on; False, or no ``recover``: the crash ends the
    run).  The recovery's reboot loses what kmemleak held of the batch's other cases, so
    those run again before the next case.  A case ``not_run`` holds back (it sends a known
    crash's trigger: hil.peer.triggers) is counted, never run."""
    start = clock()
    findings: list[Finding] = []

    def found(finding: Finding) -> None:
        findings.append(finding)
        on_finding(finding)

    progress = Progress(0, cases, 0, 0.0)
    queue = deque(range(first, first + cases))
    finished: set[int] = set()
    crashes = skipped = 0
    batch: list[Case] = []
    while queue:
        number = queue.popleft()
        case = make_case(scenarios, seed, number)
        if not_run(case):
            skipped += 1
        else:
            batch.append(case)
            try:
                batch = _run_case(case, batch, fails, scans, not queue, findings, found)
            except Crashed as crash:
                if recover is None or not recover(crash):
                    raise
                crashes += 1
                queue.extendleft(reversed([c.number for c in batch if c.number != number]))
                batch = []
        if number in finished:
            continue  # a batch's case run again after a crash: counted once
        finished.add(number)
        elapsed = clock() - start
        progress = Progress(len(finished), cases, len(findings), elapsed, crashes, skipped)
        on_progress(progress)
    if scans is not None and batch:  # the last cases were held back: scan the rest now
        leak = scans.scan()
        if leak:
            _blame(batch, leak, fails, scans, {f.case.number for f in findings}, found)
            progress = replace(progress, findings=len(findings))
    return Report(progress, tuple(findings))


def _run_case(
    case: Case,
    batch: list[Case],
    fails: Callable[[Scenario], bool],
    scans: LeakScans | None,
    last: bool,
    findings: list[Finding],
    found: Callable[[Finding], None],
) -> list[Case]:
    """``case`` (the last of ``batch``) run, its batch scanned when that is due, and each
    failure shrunk or blamed; the batch still unscanned after it."""
    failed = scans.unscanned(case.scenario) if scans else fails(case.scenario)
    if scans is None:
        if failed:
            _shrunk(case, fails, found)
        return []
    if not (failed or len(batch) >= scans.every or last):
        return batch
    # Before a shrink: its tries' scans would take the batch's leaks as theirs.
    leak = scans.scan()
    if failed:
        _shrunk(case, fails, found)
    if leak:
        _blame(batch, leak, fails, scans, {f.case.number for f in findings}, found)
    return []


def _shrunk(
    case: Case, fails: Callable[[Scenario], bool], found: Callable[[Finding], None]
) -> None:
    """The failing ``case`` shrunk and told to ``found``; kept whole when the run's stop cuts
    its shrinking short."""
    try:
        shrunk = shrink(case.scenario, fails)
    except (Interrupted, Crashed):
        # It failed once, whole: that stands; its shrinking was cut short.
        found(Finding(case, Shrunk(case.scenario, 1, reproduced=False)))
        raise
    found(Finding(case, shrunk))


def _blame(
    batch: Sequence[Case],
    leak: str,
    fails: Callable[[Scenario], bool],
    scans: LeakScans,
    known: set[int],
    found: Callable[[Finding], None],
) -> None:
    """A batch's scan reported ``leak``: each case run again alone and scanned after it; one
    that leaks (or fails otherwise) alone is a finding, shrunk unless ``known`` (found
    already); when none leaks alone, the batch is the finding."""
    whole = Finding(batch[-1], Shrunk(batch[-1].scenario, 1, False), tuple(batch), leak)
    leaked = False
    try:
        for case in batch:
            failed = scans.unscanned(case.scenario)
            alone = bool(scans.scan())
            leaked = leaked or alone
            if (failed or alone) and case.number not in known:
                known.add(case.number)
                _shrunk(case, fails, found)
    finally:
        if not leaked:
            found(whole)  # the batch's leak stands, also when its rerun was cut short
