"""Each test's outcome per night, and the tests that flip between pass and fail.

``outcomes.jsonl`` beside ``metrics.jsonl`` keeps one line per test per
run, appended by the pipeline from the run's Allure results::

    {"run": 12, "night": "2026-12-01T02:00:03Z", "test": "suites/test_close.py::test_x[a]",
     "status": "failed", "category": "Product failures", "pair": "t6-pair-1",
     "provider": "iw_cxgb4", "known_flaky": false}

A test's outcomes over the last N nights read as a string, oldest first:
``P`` passed, ``F`` failed, ``B`` broken (a test defect), ``L`` a lab or
infrastructure error, ``S`` skipped, ``?`` unknown, ``.`` not run that
night.  A flip is a pass next to a failure (F or B) in that string once L,
S, ? and . are left out: a lab that was down says nothing of the test.
Tests with flips are ranked by flips, then failures, then id.  A night is
one run, told apart by its number and start time (numbers restart when the
runs directory is wiped), in the order the file recorded them.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from hil.errors import InputError
from hil.report.categories import INFRASTRUCTURE
from hil.report.results import Result

OUTCOMES_HISTORY = "outcomes.jsonl"
SUMMARY_FILE = "summary.txt"  # the pipeline's summary, written into the report directory
LETTERS = {"passed": "P", "failed": "F", "broken": "B", "skipped": "S"}
NOT_RUN = "."
COUNTED = ("P", "F", "B")  # what a flip is made of
PROPERTIES_SHOWN = 10  # the environment table shows the first ones; the summary has all


@dataclass(frozen=True)
class Outcome:
    """One test's outcome in one night's run."""

    run: int
    night: str  # when the run's first test started, UTC ISO 8601
    test: str
    status: str
    category: str | None
    pair: str | None
    provider: str | None
    known_flaky: bool

    @property
    def key(self) -> tuple[int, str]:
        """Which night: the run number and its time (run numbers restart when the runs
        directory is wiped; the outcomes outlive it)."""
        return (self.run, self.night)

    @property
    def letter(self) -> str:
        if self.category == INFRASTRUCTURE:
            return "L"
        return LETTERS.get(self.status, "?")


@dataclass(frozen=True)
class Flaky:
    """A test that flipped between pass and fail in the window."""

    test: str
    flips: int
    failures: int
    outcomes: str  # one letter per night, oldest first
    where: str  # the pairs and providers it ran on, newest last
    known_flaky: bool  # in the quarantine list at its last run

    def line(self) -> str:
        """``3 flips  PPFPFFP  suites/test_close.py::test_x[a]  (t6-pair-1, iw_cxgb4)``."""
        known = " [known flaky]" if self.known_flaky else ""
        flips = f"{self.flips} flip{'s' if self.flips != 1 else ''}"
        return f"{flips}  {self.outcomes}  {self.test}  ({self.where}){known}"


def night_of(results: Iterable[Result]) -> str:
    """When a run's first test started (UTC, ISO 8601); now when none has a start."""
    starts = [r.start for r in results if r.start]
    when = (
        dt.datetime.fromtimestamp(min(starts) / 1000, dt.UTC) if starts else dt.datetime.now(dt.UTC)
    )
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def outcomes_of(run: int, results: Iterable[Result]) -> list[Outcome]:
    """A run's outcome records, one per test (the last result of a test run twice)."""
    ordered = sorted(results, key=lambda r: r.start)
    by_test = {r.test: r for r in ordered}
    night = night_of(ordered)
    return [
        Outcome(run, night, r.test, r.status, r.category, r.pair, r.provider, r.known_flaky)
        for r in sorted(by_test.values(), key=lambda r: r.test)
    ]


def load(path: Path) -> list[Outcome]:
    """The kept outcome records, oldest first; InputError on a line that is not one."""
    if not path.is_file():
        return []
    out = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            out.append(Outcome(**json.loads(line)))
        except (ValueError, TypeError) as e:
            raise InputError(f"{path}:{n}: not an outcome record: {e}") from None
    return out


def record(reports: Path, outcomes: Sequence[Outcome], keep: int) -> list[Outcome]:
    """Append a run's outcomes to ``outcomes.jsonl``, keep the last ``keep`` runs; the kept."""
    path = reports / OUTCOMES_HISTORY
    kept = _last_runs([*load(path), *outcomes], keep)
    tmp = path.with_name(f".{path.name}.new")
    tmp.write_text("".join(json.dumps(asdict(o), sort_keys=True) + "\n" for o in kept))
    os.replace(tmp, path)  # a reader never sees half a file
    return kept


def _last_runs(history: Sequence[Outcome], n: int) -> list[Outcome]:
    keys = set(window(history, n))
    return [o for o in history if o.key in keys]


def flips(letters: str) -> int:
    """How often a pass and a failure are next to each other, lab errors and skips aside."""
    counted = ["P" if c == "P" else "F" for c in letters if c in COUNTED]
    return sum(a != b for a, b in zip(counted, counted[1:], strict=False))


def window(history: Sequence[Outcome], nights: int) -> list[tuple[int, str]]:
    """The last ``nights`` nights (run, time) of the history, in the order recorded."""
    return list(dict.fromkeys(o.key for o in history))[-nights:]


def rank(history: Sequence[Outcome], nights: int) -> list[Flaky]:
    """The tests that flipped in the last ``nights`` runs, most flips first."""
    shown = window(history, nights)
    by_test: dict[str, dict[tuple[int, str], Outcome]] = {}
    for o in _last_runs(history, nights):
        by_test.setdefault(o.test, {})[o.key] = o
    ranked = []
    for test, runs in by_test.items():
        letters = "".join(runs[k].letter if k in runs else NOT_RUN for k in shown)
        n = flips(letters)
        if n:
            last = runs[max(runs, key=shown.index)]
            ranked.append(
                Flaky(
                    test,
                    n,
                    sum(c in "FB" for c in letters),
                    letters,
                    _where(runs.values()),
                    last.known_flaky,
                )
            )
    return sorted(ranked, key=lambda f: (-f.flips, -f.failures, f.test))


def _where(outcomes: Iterable[Outcome]) -> str:
    places = dict.fromkeys(
        f"{o.pair or 'no pair'}, {o.provider or 'provider unknown'}" for o in outcomes
    )
    return "; ".join(places)


def _flipped(ranked: Sequence[Flaky], nights: int) -> str:
    """``3 tests flipped between pass and fail in the last 14 nights``."""
    count = {0: "no test", 1: "1 test"}.get(len(ranked), f"{len(ranked)} tests")
    last = "the last night" if nights == 1 else f"the last {nights} nights"
    return f"{count} flipped between pass and fail in {last}"


def properties(ranked: Sequence[Flaky], nights: int) -> dict[str, str]:
    """``environment.properties`` lines: how many flipped in ``nights``, and the first."""
    shown = f" (all in {SUMMARY_FILE} beside index.html)" if ranked else ""
    props = {"flaky": _flipped(ranked, nights) + shown}
    for i, f in enumerate(ranked[:PROPERTIES_SHOWN], 1):
        props[f"flaky.{i:02d}"] = f.line()
    return props


def summary_lines(ranked: Sequence[Flaky], nights: int) -> list[str]:
    """The summary's flaky part: a head line, then one line per test."""
    legend = " (oldest first: P passed, F failed, B broken, L lab error, S skipped, . not run)"
    return [f"flaky: {_flipped(ranked, nights)}{legend if ranked else ''}"] + [
        f"  {f.line()}" for f in ranked
    ]


def known_flaky_line(results: Sequence[Result]) -> str | None:
    """The summary's line on quarantined tests that failed, or None when none did."""
    failed = sorted(r.test for r in results if r.known_flaky and r.failing)
    if not failed:
        return None
    return f"known flaky: {len(failed)} failed, reported apart, not failing the run: " + ", ".join(
        failed
    )


def known_kernel_lines(results: Sequence[Result]) -> list[str]:
    """The summary's lines on known kernel findings, one per finding: the tests whose
    hosts logged it (reported apart, not failing them)."""
    tests: dict[str, list[str]] = {}
    for r in sorted(results, key=lambda r: r.test):
        for finding in r.known_kernel:
            tests.setdefault(finding, []).append(r.test)
    return [
        f"known kernel finding: {finding} (reported apart, not failing the test) in "
        + ", ".join(found)
        for finding, found in sorted(tests.items())
    ]
