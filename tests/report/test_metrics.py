"""Recording metrics: series keys, percentiles, race coverage, the hil_metrics fixture."""

from __future__ import annotations

import json

import pytest

from hil.errors import InputError
from hil.judge.timeline import Timeline
from hil.report import attach
from hil.report.metrics import RECORDER, Recorder, percentile, series_key, summarize

pytest_plugins = ["pytester"]


def test_a_series_is_the_name_and_its_sorted_labels() -> None:
    assert series_key("connect_us", {}) == "connect_us"
    assert series_key("race_rounds", {"race": "r", "order": "before"}) == (
        "race_rounds{order=before,race=r}"
    )
    rec = Recorder()
    rec.current_test = "t::a"
    rec.run_labels = {"kernel": "6.12"}
    m = rec.record("close_us", 812, "us", by="passive")
    assert m.series == "close_us{by=passive,kernel=6.12}" and m.test == "t::a"
    assert m.to_json() == {
        "test": "t::a",
        "name": "close_us",
        "value": 812.0,
        "unit": "us",
        "labels": {"kernel": "6.12", "by": "passive"},
    }


@pytest.mark.parametrize(
    ("name", "labels"), [("a{b}", {}), ("", {}), ("x", {"k": "a,b"}), ("x", {"k": ""})]
)
def test_names_and_labels_that_would_break_a_series_key_are_refused(
    name: str, labels: dict[str, str]
) -> None:
    with pytest.raises(InputError, match="metric"):
        Recorder().record(name, 1.0, "us", **labels)


def test_nearest_rank_percentiles() -> None:
    assert percentile([4, 1, 3, 2], 50) == 2
    assert percentile(range(1, 101), 99) == 99
    assert percentile([7], 99) == 7
    assert summarize([5, 1, 9, 3]) == {"p50": 3, "p99": 9, "max": 9}
    with pytest.raises(ValueError):
        percentile([], 50)


def test_percentiles_distribution_and_coverage_become_labelled_series() -> None:
    rec = Recorder()
    got = rec.percentiles("storm_step_us", {"p50": 800, "p99": 3100}, "us", step="connect")
    assert [m.series for m in got] == [
        "storm_step_us{stat=p50,step=connect}",
        "storm_step_us{stat=p99,step=connect}",
    ]
    dist = rec.distribution("storm_step_us", [10, 30, 20], "us", step="destroy")
    assert [(m.labels["stat"], m.value) for m in dist] == [("p50", 20), ("p99", 30), ("max", 30)]
    with pytest.raises(InputError, match="unknown statistics"):
        rec.percentiles("x_us", {"p90": 1.0}, "us")
    with pytest.raises(InputError, match="no samples"):
        rec.distribution("x_us", [], "us")
    cov = rec.coverage("destroy_vs_reply", {"before": 4, "after": 1}, ("before", "during", "after"))
    assert {m.series: m.value for m in cov} == {
        "race_rounds{order=after,race=destroy_vs_reply}": 1,
        "race_rounds{order=before,race=destroy_vs_reply}": 4,
        "race_rounds{order=during,race=destroy_vs_reply}": 0,
        "race_orders_reached{race=destroy_vs_reply}": pytest.approx(2 / 3),
    }
    assert len(rec.all()) == 2 + 3 + 4


def test_a_timelines_metrics_are_labelled_with_its_scenario() -> None:
    RECORDER.current_test = "test_scenario_label"
    tl = Timeline("link-pull-admin", "siw", ("a", "b"), metrics={"detection_us": 2.5e6})
    attach.attach_timeline(tl)
    (m,) = RECORDER.of_test("test_scenario_label")
    assert (m.series, m.unit) == ("detection_us{scenario=link-pull-admin}", "us")


FIXTURE_TEST = """
def test_storm(hil_metrics):
    hil_metrics.record("cycle_rate_per_s", 812.5, "1/s", n="64")
    hil_metrics.percentiles("storm_step_us", {"p50": 800, "max": 4000}, "us", step="connect")
    hil_metrics.coverage("reject_vs_upcall", {"before": 3}, ("before", "after"))
"""


def test_the_fixture_records_steps_and_run_files_with_the_session_label(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_storm=FIXTURE_TEST)
    out = pytester.path / "allure"
    pytester.runpytest_subprocess(
        f"--alluredir={out}", "--hil-metric-label", "kernel=6.12", "-p", "no:cacheprovider"
    ).assert_outcomes(passed=1)
    metrics = json.loads((out / "hil-metrics.json").read_text())
    assert {m["test"] for m in metrics} == {"test_storm.py::test_storm"}
    assert all(m["labels"]["kernel"] == "6.12" for m in metrics)
    assert [(m["name"], m["value"]) for m in metrics] == [
        ("cycle_rate_per_s", 812.5),
        ("storm_step_us", 800),
        ("storm_step_us", 4000),
        ("race_rounds", 0),
        ("race_rounds", 3),
        ("race_orders_reached", 0.5),
    ]
    (result,) = [json.loads(p.read_text()) for p in out.glob("*-result.json")]
    steps = [s["name"] for s in result["steps"]]
    assert steps[0] == "metric cycle_rate_per_s{kernel=6.12,n=64} = 812.5 1/s"
    assert "metric race_orders_reached{kernel=6.12,race=reject_vs_upcall} = 0.5 ratio" in steps


def test_a_bad_session_label_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_storm=FIXTURE_TEST)
    done = pytester.runpytest_subprocess("--hil-metric-label", "kernel", "-p", "no:cacheprovider")
    assert done.ret == pytest.ExitCode.USAGE_ERROR
    assert "--hil-metric-label 'kernel': expected K=V" in done.stderr.str()
