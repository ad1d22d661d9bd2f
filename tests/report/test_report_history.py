"""Kept runs, history carried into the next results, the pipeline's exit status."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hil.errors import InputError, LabError
from hil.report import history, pipeline
from hil.report.categories import write_categories
from hil.report.executor import executor


def fake_report(run: history.Run, passed: int = 1, failed: int = 0) -> None:
    """What allure generate leaves that the pipeline reads: summary and history."""
    (run.report / "widgets").mkdir(parents=True)
    stat = {"passed": passed, "failed": failed, "broken": 0, "skipped": 0, "unknown": 0}
    (run.report / "widgets" / "summary.json").write_text(json.dumps({"statistic": stat}))
    (run.report / "history").mkdir()
    (run.report / "history" / "history-trend.json").write_text(f'[{{"buildOrder": {run.order}}}]')


def test_each_run_starts_with_the_last_reports_history(tmp_path: Path) -> None:
    first = history.new_run(tmp_path)
    assert first.order == 1 and not (first.results / "history").exists()
    fake_report(first)
    history.finish(tmp_path, first, keep=3)
    second = history.new_run(tmp_path)
    assert second.order == 2
    trend = json.loads((second.results / "history" / "history-trend.json").read_text())
    assert trend == [{"buildOrder": 1}]


def test_only_the_last_n_runs_are_kept_and_latest_points_at_the_newest(tmp_path: Path) -> None:
    for _ in range(5):
        run = history.new_run(tmp_path)
        fake_report(run)
        history.finish(tmp_path, run, keep=3)
    assert [r.order for r in history.runs(tmp_path)] == [3, 4, 5]
    assert (tmp_path / "latest").resolve() == (tmp_path / "runs" / "0005").resolve()


def test_summary_line_and_a_missing_report(tmp_path: Path) -> None:
    run = history.new_run(tmp_path)
    fake_report(run, passed=3, failed=1)
    assert history.summary(run.report).line() == "3 passed, 1 failed, 0 broken, 0 skipped"
    with pytest.raises(InputError, match="not an Allure report summary"):
        history.summary(tmp_path / "nothing")


def results_with(tmp_path: Path, *outcomes: tuple[str, str]) -> Path:
    tmp_path.mkdir(exist_ok=True)
    write_categories(tmp_path)
    for i, (status, message) in enumerate(outcomes):
        data = {"status": status, "statusDetails": {"message": message}}
        (tmp_path / f"{i}-result.json").write_text(json.dumps(data))
    return tmp_path


@pytest.mark.parametrize(
    ("outcomes", "pytest_rc", "status"),
    [
        ((("passed", ""), ("skipped", "")), 0, 0),
        ((("failed", "AssertionError: contract FAILED: x"),), 1, 1),
        ((("broken", "hil.errors.Unreachable: lab-a: down"),), 1, 3),
        (
            (("broken", "hil.errors.Unreachable: lab-a: down"), ("failed", "AssertionError: x")),
            1,
            1,
        ),
        ((("failed", "known flaky: r (u)\nAssertionError: x"), ("passed", "")), 1, 0),
        (
            (("failed", "known flaky: r (u)\nAssertionError: x"), ("failed", "AssertionError: y")),
            1,
            1,
        ),
        (
            (
                ("broken", "known flaky: r (u)\nKeyError: k"),
                ("broken", "hil.errors.Unreachable: a"),
            ),
            1,
            3,
        ),
        ((), 5, 3),  # no tests collected
        ((), 2, 3),  # interrupted
        ((), 1, 1),  # failed outside any result (e.g. a teardown error)
    ],
)
def test_exit_status_tells_test_failures_from_lab_trouble(
    tmp_path: Path, outcomes: tuple[tuple[str, str], ...], pytest_rc: int, status: int
) -> None:
    assert pipeline.exit_status(results_with(tmp_path / "r", *outcomes), pytest_rc) == status


def test_a_missing_generator_is_an_infrastructure_error(tmp_path: Path) -> None:
    with pytest.raises(LabError, match="run ci/install"):
        pipeline.generate(tmp_path, tmp_path / "report", tmp_path / "no-allure")


def test_bad_arguments_exit_1_with_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert pipeline.main(["--keep", "0"]) == 1
    assert capsys.readouterr().err.strip() == "hil report: error: --keep must be at least 1, not 0"
    assert pipeline.main(["--pcap", "sometimes"]) == 1
    assert pipeline.main(["--flaky-nights", "1"]) == 1
    assert "--flaky-nights must be at least 2, not 1" in capsys.readouterr().err
    assert pipeline.main(["--drift-nights", "0"]) == 1
    assert "--drift-nights must be at least 1, not 0" in capsys.readouterr().err
    assert pipeline.main(["--drift-threshold", "wire=2"]) == 1
    assert capsys.readouterr().err.strip() == (
        "hil report: error: drift threshold 'wire=2': wire takes fail or flag"
    )


def test_executor_from_jenkins_gitlab_or_a_local_run() -> None:
    jenkins = executor(
        {
            "JENKINS_URL": "https://ci/",
            "BUILD_NUMBER": "41",
            "JOB_NAME": "iwarp",
            "BUILD_URL": "https://ci/job/iwarp/41/",
        }
    )
    assert (jenkins["type"], jenkins["buildOrder"]) == ("jenkins", 41)
    assert jenkins["reportUrl"] == "https://ci/job/iwarp/41/allure"
    gitlab = executor(
        {
            "GITLAB_CI": "true",
            "CI_PIPELINE_IID": "7",
            "CI_PIPELINE_ID": "900",
            "CI_JOB_URL": "https://gl/p/-/jobs/5",
            "CI_PROJECT_PATH": "lab/hil",
            "CI_JOB_NAME": "nightly",
        }
    )
    assert (gitlab["type"], gitlab["buildOrder"]) == ("gitlab", 7)
    assert gitlab["buildName"] == "lab/hil #900 nightly"
    local = executor({"HIL_BUILD_ORDER": "12"})
    assert (local["type"], local["buildOrder"]) == ("local", 12)
    assert local["buildName"] == "local run #12"
    assert executor({"HIL_BUILD_ORDER": "twelve"})["buildOrder"] == 0


def _recording_allure(tmp_path: Path) -> Path:
    """A stand-in generator that records the JVM options it was given and writes a report."""
    script = tmp_path / "allure"
    script.write_text(
        '#!/bin/sh\nprintf "%s|%s" "$JAVA_OPTS" "$ALLURE_OPTS" > "$0.opts"\n'
        'mkdir -p "$4" && touch "$4/index.html"\n'
    )
    script.chmod(0o755)
    return script


@pytest.mark.parametrize(
    ("env", "seen"),
    [
        ({}, f"|{pipeline.JVM_OPTS}"),
        ({"JAVA_OPTS": "-Xmx1g"}, "-Xmx1g|"),
        ({"ALLURE_OPTS": "-Xmx2g"}, "|-Xmx2g"),
    ],
)
def test_the_generator_gets_the_short_lived_jvm_options_unless_the_user_set_their_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, env: dict[str, str], seen: str
) -> None:
    for name in ("JAVA_OPTS", "ALLURE_OPTS"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    allure = _recording_allure(tmp_path)
    pipeline.generate(tmp_path / "results", tmp_path / "report", allure)
    assert (tmp_path / "allure.opts").read_text() == seen
