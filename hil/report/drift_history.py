"""Where the drift check's nights live, and how a night's record is read from its results.

The history is a directory of JSON records, one per night per pair, in the reports
directory of the pipeline (``ci/nightly``'s ``--reports``)::

    REPORTS/drift/<pair>/2026-12-05T02-00-03Z-run0012.json      (NightRecord.to_json)

File names sort in night order; the last ``keep`` are kept per pair.  A pair with no
directory yet has no history: its first night is recorded and nothing is compared.

A night's record (:func:`record_of`) comes from the run's Allure results: each test's
``timeline ... (json)`` attachments (its CM events' statuses) and ``wire exchange
(json)`` attachments (TCP flags, MPA fields), the night's metric series
(:mod:`hil.report.metrics_history`), and ``environment.properties`` as the report
plugin wrote it (the pair, and what it ran: kernel, firmware, driver version, module
parameters).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hil.errors import HilError, InputError
from hil.judge.timeline import Timeline
from hil.report import drift
from hil.report.drift_kinds import KINDS, Limits, Measured, TestMeasured
from hil.report.metrics_history import SeriesStats
from hil.report.results import NODEID_LABEL, labels

DIRECTORY = "drift"
DEFAULT_KEEP = 7  # a week of nights: a weekly job's effect is inside the window
TIMELINE_SUFFIX = " (json)"
EXCHANGE = "wire exchange (json)"
MPA_FIELDS = ("revision", "marker", "crc", "reject", "enhanced", "ird", "ord")
NO_PAIR = "none"  # what the report plugin writes as ``pair`` for a run on no pair


@dataclass(frozen=True)
class Loaded:
    """A pair's kept nights (oldest first) and the files that could not be read."""

    nights: tuple[drift.NightRecord, ...]
    skipped: tuple[str, ...] = ()


def _blocks(result: dict[str, Any], containers: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """The test's result, its steps and its fixtures' set-up and tear-down, nested."""
    todo = [result]
    for c in containers:
        if result.get("uuid") in c.get("children", []):
            todo += c.get("befores", []) + c.get("afters", [])
    while todo:
        block = todo.pop()
        yield block
        todo += block.get("steps", [])


def _json_files(results: Path, pattern: str) -> list[dict[str, Any]]:
    out = []
    for path in sorted(results.glob(pattern)):
        try:
            out.append(json.loads(path.read_text()))
        except ValueError:
            continue  # allure-pytest writes each file whole: a broken one is no test's
    return out


def _attachment(results: Path, a: dict[str, Any]) -> Any:
    try:
        return json.loads((results / str(a.get("source"))).read_text())
    except (OSError, ValueError):
        return None


def _statuses(data: Any) -> tuple[tuple[str, str, str, int], ...]:
    try:
        tl = Timeline.from_dict(data)
    except (HilError, KeyError, TypeError, ValueError):
        return ()
    return tuple((tl.scenario, e.side, e.type, e.status) for e in tl.events)


def _wire(data: Any) -> tuple[set[str], set[tuple[str, str, str]]]:
    flags: set[str] = set()
    mpa: set[tuple[str, str, str]] = set()
    for conn in data.get("connections", []) if isinstance(data, dict) else []:
        for p in conn.get("packets", []):
            flags.update(p.get("flags", []))
            m = p.get("mpa")
            if m:
                kind = str(m.get("kind"))
                mpa.update((kind, f, json.dumps(m.get(f))) for f in MPA_FIELDS)
    return flags, mpa


def measured_test(results: Path, result: dict[str, Any], containers: list[Any]) -> TestMeasured:
    """One test's statuses and wire, from its attachments."""
    test = (labels(result).get(NODEID_LABEL) or [str(result.get("fullName"))])[0]
    statuses: list[tuple[str, str, str, int]] = []
    flags: set[str] = set()
    mpa: set[tuple[str, str, str]] = set()
    for block in _blocks(result, containers):
        for a in block.get("attachments", []):
            name = str(a.get("name"))
            if name == EXCHANGE:
                f, m = _wire(_attachment(results, a))
                flags |= f
                mpa |= m
            elif name.startswith("timeline ") and name.endswith(TIMELINE_SUFFIX):
                statuses += _statuses(_attachment(results, a))
    return TestMeasured(test, tuple(statuses), frozenset(flags), tuple(sorted(mpa)))


def measured(results: Path, series: Mapping[str, SeriesStats]) -> Measured:
    """What a run's results hold for the drift check."""
    containers = _json_files(results, "*-container.json")
    tests = [measured_test(results, r, containers) for r in _json_files(results, "*-result.json")]
    return Measured(tuple(sorted(tests, key=lambda t: t.test)), dict(series))


# The pipeline's own environment lines (metric trends, flaky tests, drift): not the pair's.
_NOT_STACK = ("metric.", "flaky", "drift")


def record_of(
    run: int, night: str, results: Path, env: Mapping[str, str], series: Mapping[str, Any]
) -> drift.NightRecord:
    """Tonight's record: every kind's values, and the pair's stack from ``env``."""
    m = measured(results, series)
    stack = {k: v for k, v in env.items() if not k.startswith(_NOT_STACK) and k != "pair"}
    values = {k.name: k.pick(m) for k in KINDS}
    return drift.NightRecord(run, night, env.get("pair") or NO_PAIR, values, stack)


def pair_dir(history: Path, pair: str) -> Path:
    """The pair's directory (a name with a path separator or a leading dot made safe)."""
    return history / re.sub(r"[^A-Za-z0-9_.+-]|^\.", "_", pair)


def load(directory: Path, keep: int) -> Loaded:
    """The last ``keep`` nights kept in a pair's directory, oldest first."""
    nights, skipped = [], []
    files = sorted(directory.glob("*.json")) if directory.is_dir() else []
    for path in files[-keep:]:
        try:
            nights.append(drift.NightRecord.from_json(path.read_text(), str(path)))
        except (OSError, InputError) as e:
            skipped.append(str(e))  # each names the file
    return Loaded(tuple(nights), tuple(skipped))


def save(directory: Path, record: drift.NightRecord, keep: int) -> Path:
    """Write tonight's record; remove all but the newest ``keep``."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{record.night.replace(':', '-')}-run{record.run:04d}.json"
    path.write_text(record.to_json() + "\n")
    for old in sorted(directory.glob("*.json"))[:-keep]:
        old.unlink()
    return path


def check(
    reports: Path, tonight: drift.NightRecord, limits: Mapping[str, Limits], keep: int
) -> tuple[drift.Drift, tuple[str, ...]]:
    """Tonight against the pair's kept nights, then tonight recorded; the drift and the
    history files that could not be read."""
    directory = pair_dir(reports / DIRECTORY, tonight.pair)
    before = load(directory, keep)
    found = drift.compare(tonight, before.nights, limits)
    save(directory, tonight, keep)
    return found, before.skipped


def skipped_lines(skipped: Sequence[str]) -> list[str]:
    """The summary's lines on history records that could not be read."""
    return [f"drift: skipped an unreadable record: {s}" for s in skipped]
