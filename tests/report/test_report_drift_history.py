"""A night's drift record read from Allure results, and the per-pair history directory."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hil.judge.records import Event
from hil.judge.timeline import Timeline
from hil.report import drift, drift_history
from hil.report.metrics_history import SeriesStats

TEST = "suites/test_close.py::test_x[a-b]"


def _attach(results: Path, name: str, body: Any, source: str) -> dict[str, str]:
    (results / source).write_text(json.dumps(body))
    return {"name": name, "source": source, "type": "application/json"}


def _stats(name: str, unit: str, mean: float, p99: float) -> SeriesStats:
    return SeriesStats(name, unit, 3, mean, mean, mean, p99, p99)


def results_dir(tmp_path: Path) -> Path:
    """One test: a timeline in a step of its call, the wire exchange in its tear-down."""
    events = (Event("lab-a", "a", 10, 10, "REJECTED", status=-104, id="a:1"),)
    tl = Timeline("reject", "siw", ("lab-a", "lab-b"), events=events).to_dict()
    mpa = {"kind": "reply", "revision": 2, "marker": False, "crc": True, "reject": True}
    packets = [{"flags": ["ACK", "RST"], "mpa": mpa}, {"flags": ["SYN"], "mpa": None}]
    exchange = {"connections": [{"packets": packets}]}
    step = {
        "name": "sequence",
        "attachments": [_attach(tmp_path, "timeline reject (json)", tl, "t")],
    }
    result = {
        "uuid": "u1",
        "labels": [{"name": "nodeid", "value": TEST}],
        "steps": [step],
        # the picture of the same name is no JSON: left alone
        "attachments": [{"name": "timeline reject", "source": "missing.svg"}],
    }
    (tmp_path / "u1-result.json").write_text(json.dumps(result))
    teardown = {"attachments": [_attach(tmp_path, "wire exchange (json)", exchange, "w")]}
    container = {"children": ["u1"], "afters": [{"name": "hil_test::0", "steps": [teardown]}]}
    (tmp_path / "c1-container.json").write_text(json.dumps(container))
    (tmp_path / "broken-result.json").write_text("{")
    return tmp_path


def test_a_nights_record_from_the_results(tmp_path: Path) -> None:
    series = {
        "connect_us{scenario=reject}": _stats("connect_us", "us", 900, 1200),
        "detection_us{scenario=pull}": _stats("detection_us", "us", 3e4, 8e4),
        "storm_rate_per_s{n=64}": _stats("storm_rate_per_s", "1/s", 40, 45),
        "race_rounds{order=a}": _stats("race_rounds", "", 3, 3),
    }
    env = {"pair": "t6-pair-1", "t6-a.kernel": "6.12.1", "metric.connect_us": "1 ms"}
    rec = drift_history.record_of(3, "2026-12-05T02:00:00Z", results_dir(tmp_path), env, series)
    assert rec.pair == "t6-pair-1" and rec.stack == {"t6-a.kernel": "6.12.1"}
    assert rec.values == {
        "wire": {
            f"{TEST} tcp flags": "ACK,RST,SYN",
            f"{TEST} mpa reply.revision": "2",
            f"{TEST} mpa reply.marker": "false",
            f"{TEST} mpa reply.crc": "true",
            f"{TEST} mpa reply.reject": "true",
            f"{TEST} mpa reply.enhanced": "null",  # not in this frame's record
            f"{TEST} mpa reply.ird": "null",
            f"{TEST} mpa reply.ord": "null",
        },
        "status": {f"{TEST} reject a REJECTED": "-104"},
        "bound": {"connect_us{scenario=reject}": 1200},
        "detection": {"detection_us{scenario=pull}": 8e4},
        "storm": {"storm_rate_per_s{n=64}": 40},
    }


def test_a_run_on_no_pair_is_kept_under_none(tmp_path: Path) -> None:
    rec = drift_history.record_of(1, "2026-12-05T02:00:00Z", tmp_path, {}, {})
    assert rec.pair == "none" and rec.values["status"] == {}


def _rec(run: int, pair: str = "p/1") -> drift.NightRecord:
    return drift.NightRecord(run, f"2026-12-{run:02d}T02:00:00Z", pair, {"status": {}}, {})


def test_the_history_keeps_the_last_nights_per_pair(tmp_path: Path) -> None:
    history = tmp_path / "drift"
    for run in range(1, 5):
        found, skipped = drift_history.check(tmp_path, _rec(run), drift.default_limits(), 2)
        assert found.nights == min(run - 1, 2) and skipped == ()
    directory = history / "p_1"  # the pair's name made a safe directory name
    assert sorted(p.name for p in directory.iterdir()) == [
        "2026-12-03T02-00-00Z-run0003.json",
        "2026-12-04T02-00-00Z-run0004.json",
    ]
    assert [n.run for n in drift_history.load(directory, 7).nights] == [3, 4]


def test_an_unreadable_record_is_skipped_and_named(tmp_path: Path) -> None:
    drift_history.save(tmp_path, _rec(1), 7)
    (tmp_path / "2026-12-02T02-00-00Z-run0002.json").write_text("{not json")
    kept = drift_history.load(tmp_path, 7)
    assert [n.run for n in kept.nights] == [1]
    assert kept.skipped[0].startswith(
        f"{tmp_path}/2026-12-02T02-00-00Z-run0002.json: not a drift record (JSONDecodeError"
    )
    assert drift_history.skipped_lines(["x: why"]) == [
        "drift: skipped an unreadable record: x: why"
    ]
    assert drift_history.load(tmp_path / "none", 7) == drift_history.Loaded(())
