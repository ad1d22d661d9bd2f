"""The metrics history (metrics.jsonl), the threshold flags and the trend charts."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from datetime import UTC, datetime
from pathlib import Path

import pytest

from hil.errors import InputError
from hil.inventory.thresholds import Threshold, parse_cli
from hil.report import metrics_flags, metrics_history, pipeline, trend
from hil.report.metrics_history import Night, SeriesStats
from hil.report.svgdraw import BAD_COLOR

SVG = "{http://www.w3.org/2000/svg}"
NOW = datetime(2026, 12, 1, 2, 0, 3, tzinfo=UTC)


def _m(name: str, value: float, unit: str = "us", **labels: str) -> dict[str, object]:
    return {"test": "t", "name": name, "value": value, "unit": unit, "labels": labels}


def _night(run: int, **means: float) -> Night:
    # One value each: every statistic is that value; the name is the key without labels.
    series = {k: SeriesStats(k.split("{")[0], "us", 1, v, v, v, v, v) for k, v in means.items()}
    return Night(run, "", series)


def test_a_run_becomes_one_line_with_each_series_statistics(tmp_path: Path) -> None:
    values = [_m("connect_us", v, scenario="close") for v in (100, 300, 200, 400)]
    values.append(_m("cycle_rate_per_s", 50, "1/s"))
    kept = metrics_history.record(tmp_path, 7, values, keep=30, now=NOW)
    (night,) = kept
    assert (night.run, night.time) == (7, "2026-12-01T02:00:03Z")
    s = night.series["connect_us{scenario=close}"]
    assert (s.count, s.mean, s.min, s.p50, s.p99, s.max) == (4, 250, 100, 200, 400, 400)
    assert s.labels == {"scenario": "close"} and s.name == "connect_us"
    assert metrics_history.load(tmp_path / metrics_history.HISTORY) == kept


def test_only_the_last_nights_are_kept_and_old_lines_still_read(tmp_path: Path) -> None:
    # A line of the format before labels and percentiles.
    old = {"run": 1, "metrics": {"connect_us": {"mean": 2000.0, "count": 3, "unit": "us"}}}
    (tmp_path / metrics_history.HISTORY).write_text(json.dumps(old) + "\n")
    for run in (2, 3, 4):
        kept = metrics_history.record(tmp_path, run, [_m("connect_us", 1000 * run)], 3, NOW)
    assert [n.run for n in kept] == [2, 3, 4]
    first = metrics_history.load(tmp_path / metrics_history.HISTORY)[0]
    assert first.series["connect_us"].p99 == 2000
    older = metrics_history.load(tmp_path / "nothing")
    assert older == []
    (tmp_path / "bad.jsonl").write_text('{"run": 1}\n')
    with pytest.raises(InputError, match="bad.jsonl:1: not a metrics history line"):
        metrics_history.load(tmp_path / "bad.jsonl")
    old_night = metrics_history.load(tmp_path / metrics_history.HISTORY)
    assert old_night[0].series["connect_us"].count == 1


def test_environment_lines_show_each_series_trend() -> None:
    props = metrics_history.properties([_night(2, connect_us=2500), _night(3, connect_us=4000)])
    assert props == {"metric.connect_us": "4 ms over 1 values (runs 2..3: 2.5, 4)"}
    seconds = metrics_history.properties([_night(9, detection_us=2975236.3)])
    assert seconds == {"metric.detection_us": "2.975 s over 1 values (runs 9..9: 2.975)"}


def test_thresholds_flag_the_newest_night_only() -> None:
    nights = [_night(1, connect_us=1000, rate=90), _night(2, connect_us=1200, rate=80)]
    nights.append(_night(3, connect_us=1900, rate=40))
    thresholds = [
        parse_cli("connect_us>1500"),  # 1900 > 1500
        parse_cli("connect_us:p99>+50%"),  # +73% against the median 1100
        parse_cli("rate<-50%"),  # -52% against 85
        parse_cli("rate<30"),  # 40 is not below 30
        parse_cli("connect_us<-10%"),  # a rise is not a fall
    ]
    flags, unmatched = metrics_flags.check(nights, thresholds)
    assert [(f.series, f.kind) for f in flags] == [
        ("connect_us", "above"),
        ("connect_us", "rise"),
        ("rate", "fall"),
    ]
    assert unmatched == []
    assert flags[0].line() == "connect_us mean 1.9 ms > 1.5 ms (--threshold)"
    assert flags[1].line() == (
        "connect_us p99 1.9 ms +73% against the median 1.1 ms of the nights before (+50%) "
        "(--threshold)"
    )
    lines = metrics_flags.summary_lines(flags, ["x (--threshold)"], len(thresholds))
    assert lines[0] == "metrics: 3 past a threshold (5 thresholds):"
    assert lines[-1] == "  threshold matched no metric of this run: x (--threshold)"


def test_a_change_needs_earlier_nights_and_a_name_matches_every_series() -> None:
    one = [_night(1, **{"detection_us{scenario=a}": 9e6, "detection_us{scenario=b}": 1})]
    flags, _ = metrics_flags.check(one, [parse_cli("detection_us>+10%")])
    assert flags == []  # nothing to compare with
    flags, _ = metrics_flags.check(one, [Threshold("detection_us", above=5e6, source="lab:3")])
    assert [f.series for f in flags] == ["detection_us{scenario=a}"]
    assert metrics_flags.summary_lines([], [], 0) == []
    assert metrics_flags.summary_lines([], [], 2) == [
        "metrics: none past its threshold (2 thresholds)"
    ]


@pytest.mark.parametrize(
    ("spec", "want"),
    [
        ("connect_us>50000", Threshold("connect_us", above=50000, source="--threshold")),
        ("connect_us:p99>5e4", Threshold("connect_us", "p99", above=5e4, source="--threshold")),
        ("rate_per_s<100", Threshold("rate_per_s", below=100, source="--threshold")),
        ("connect_us>+50%", Threshold("connect_us", rise=50, source="--threshold")),
        ("rate_per_s:p50<-30%", Threshold("rate_per_s", "p50", fall=30, source="--threshold")),
        (
            "detection_us{scenario=link-pull}>2e6",
            Threshold("detection_us{scenario=link-pull}", above=2e6, source="--threshold"),
        ),
    ],
)
def test_command_line_thresholds(spec: str, want: Threshold) -> None:
    assert parse_cli(spec) == want


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("connect_us", "expected NAME"),
        ("connect_us:p95>1", "expected NAME"),
        ("connect_us>-5", "a signed bound needs %"),
        ("connect_us>-5%", "a rise is >[+]PCT%"),
        ("a b>1", "expected NAME"),
    ],
)
def test_bad_command_line_thresholds(spec: str, message: str) -> None:
    with pytest.raises(InputError, match=message):
        parse_cli(spec)


def test_a_chart_draws_the_runs_the_bounds_and_the_flag(tmp_path: Path) -> None:
    nights = [_night(r, connect_us=v) for r, v in ((5, 1000), (6, 1500), (7, 9000))]
    threshold = parse_cli("connect_us>5000")
    flags, _ = metrics_flags.check(nights, [threshold])
    index = trend.write_page(tmp_path, nights, flags, [threshold])
    svg = ET.fromstring((tmp_path / "metrics" / "connect_us.svg").read_text())
    dots = svg.findall(f"{SVG}circle")
    assert [d.findtext(f"{SVG}title", "").split(":")[0] for d in dots] == [
        "run 5", "run 6", "run 7",
    ]  # fmt: skip
    ys = [float(d.get("cy", 0)) for d in dots]
    assert ys[0] > ys[1] > ys[2]  # higher values, higher on the chart
    assert [d.get("stroke") for d in dots] == ["#1565c0", "#1565c0", BAD_COLOR]
    bound = [ln for ln in svg.findall(f"{SVG}line") if ln.get("stroke") == BAD_COLOR]
    assert len(bound) == 1 and ys[1] > float(bound[0].get("y1", 0)) > ys[2]
    assert "ms" in [t.text for t in svg.findall(f"{SVG}text")]  # 9000 us shown in ms
    page = index.read_text()
    assert "connect_us mean 9 ms &gt; 5 ms (--threshold)" in page and page.count("<svg") == 1


def test_a_page_without_metrics_says_so(tmp_path: Path) -> None:
    index = trend.write_page(tmp_path, [Night(1, "", {})], [], [])
    assert "No run recorded a metric." in index.read_text()


def test_a_bad_threshold_stops_the_pipeline_before_any_test(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    reports = tmp_path / "reports"
    argv = ["suites", "--reports", str(reports), "--threshold", "connect_us>>1"]
    assert pipeline.main(argv) == 1
    assert "--threshold 'connect_us>>1': expected NAME" in capsys.readouterr().err
    assert not reports.exists()  # no run was started
    lab = tmp_path / "lab.yaml"
    lab.write_text("hosts:\n  a:\n    ssh: {host: a.example}\nthresholds:\n  x_us: {}\n")
    assert pipeline.main(["suites", "--reports", str(reports), "--inventory", str(lab)]) == 1
    assert "lab.yaml:5: thresholds.x_us: give at least one" in capsys.readouterr().err
