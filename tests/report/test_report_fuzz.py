"""Fuzz findings in the night's report: one failed result per finding in the category Fuzz
findings (and no other), the replay file and the kernel log attached; the pipeline runs the
fuzz after the suites, into the same results, and folds its exit into the night's."""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

import pytest
from test_report_nightly_timeout import INVENTORY  # two siw hosts, link pair-1

from hil.errors import EXIT_INFRA, EXIT_OK, EXIT_VIOLATION
from hil.report import flaky, history, pipeline, results
from hil.report.bounded import Finished
from hil.report.categories import FUZZ_FINDING, categories, write_categories
from hil.report.fuzz import KERNEL, REPLAY, WHY, write_finding, write_known

REPLAY_TEXT = "name: mpa-request-fuzz-7-3\nsteps: []\n"
KASAN = "lab-0: BUG: KASAN: slab-use-after-free in siw_cm_work_handler+0x1c/0x3a0 [siw]"
KMEMLEAK = "kmemleak on lab-0:\nunreferenced object 0xffff888004c3e000 (size 256):"


def _finding(alluredir: Path, tmp_path: Path) -> dict[str, Any]:
    replay = tmp_path / "mpa-request-fuzz-7-3.yaml"
    replay.write_text(REPLAY_TEXT)
    line = "case 3 (mpa-request): kernel log: KASAN; shrunk to 1 sends in 4 runs"
    path = write_finding(alluredir, "mpa-request-fuzz-7-3", line, replay, [KASAN], [KMEMLEAK])
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def test_a_finding_is_a_failed_result_in_the_fuzz_category(tmp_path: Path) -> None:
    alluredir = tmp_path / "results"
    _finding(alluredir, tmp_path)
    write_categories(alluredir)
    (got,) = results.read(alluredir)
    assert (got.status, got.category) == ("failed", FUZZ_FINDING)
    assert got.test == "hil peer fuzz::mpa-request-fuzz-7-3"
    assert got.message.startswith("fuzz finding: case 3 (mpa-request): kernel log: KASAN")


def test_the_replay_file_and_the_kernel_report_are_attached(tmp_path: Path) -> None:
    alluredir = tmp_path / "results"
    data = _finding(alluredir, tmp_path)
    attached = {a["name"]: (alluredir / a["source"]).read_text() for a in data["attachments"]}
    assert attached[REPLAY] == REPLAY_TEXT
    assert attached[KERNEL] == f"{KASAN}\n"
    assert attached[WHY] == f"{KMEMLEAK}\n"


def test_a_known_crash_is_skipped_labelled_with_its_finding_in_no_failure_category(
    tmp_path: Path,
) -> None:
    alluredir = tmp_path / "results"
    replay = tmp_path / "neg-p2p-write-fuzz-7-9.yaml"
    replay.write_text(REPLAY_TEXT)
    known = (
        "known kernel finding siw-p2p-bad-rtr-iwcm-bug on lab-0: kernel BUG at "
        "drivers/infiniband/core/iwcm.c:969! (docs/findings/siw-p2p-bad-rtr-iwcm-bug.md)"
    )
    write_known(alluredir, "neg-p2p-write-fuzz-7-9", known, replay, ["lab-0: kernel BUG at x"])
    write_categories(alluredir)
    (got,) = results.read(alluredir)
    assert (got.status, got.category) == ("skipped", None)
    assert got.known_kernel == ("siw-p2p-bad-rtr-iwcm-bug",)
    assert got.message == f"crashed the host: {known}"
    assert flaky.known_kernel_lines([got]) == [
        "known kernel finding: siw-p2p-bad-rtr-iwcm-bug (reported apart, not failing the "
        "test) in hil peer fuzz::neg-p2p-write-fuzz-7-9"
    ]


def test_a_finding_is_in_its_own_category_only() -> None:
    # Its reasons may quote a contract verdict or a crash: Allure puts a result in every
    # category that matches, so the others exclude the prefix.
    message = "fuzz finding: case 1 (x): a normal connect broke the contract:\ncontract FAILED"
    matched = [
        c["name"]
        for c in categories()
        if "failed" in c["matchedStatuses"] and re.fullmatch(c["messageRegex"], message)
    ]
    assert matched == [FUZZ_FINDING]


@pytest.mark.parametrize(
    ("status", "fuzz", "folded"),
    [
        (EXIT_OK, None, EXIT_OK),
        (EXIT_OK, Finished(EXIT_OK), EXIT_OK),
        (EXIT_OK, Finished(EXIT_VIOLATION), 1),
        (EXIT_INFRA, Finished(EXIT_VIOLATION), 1),  # exit 1 wins over 3
        (EXIT_OK, Finished(EXIT_INFRA), EXIT_INFRA),
        (EXIT_OK, Finished(-2, "timeout (nightly layer ...)"), EXIT_INFRA),
        (1, Finished(EXIT_INFRA), 1),
    ],
)
def test_findings_fail_the_night_and_the_rest_is_a_lab_error(
    status: int, fuzz: Finished | None, folded: int
) -> None:
    assert pipeline.with_fuzz(status, fuzz) == folded


def _args(tmp_path: Path, *extra: str, pytest_args: tuple[str, ...] = ()) -> argparse.Namespace:
    inventory = tmp_path / "lab.yaml"
    inventory.write_text(INVENTORY)
    argv = ["--inventory", str(inventory), "--reports", str(tmp_path / "R"), *extra]
    args = pipeline.build_parser().parse_args(argv)
    args.pytest_args = list(pytest_args)  # main's split of its argv at "--"
    args.fuzz_pair = pipeline.fuzz_pair(args)
    return args


def test_the_fuzz_takes_the_inventorys_first_pair_unless_given_one(tmp_path: Path) -> None:
    run = history.new_run(tmp_path / "R")
    argv = pipeline.fuzz_argv(_args(tmp_path, "--fuzz-cases", "5", "--fuzz-seed", "7"), run)
    assert argv[1:3] == ["-m", "hil"]
    assert argv[5:] == [
        *("peer", "fuzz", "pair-1", "--seed", "7", "--cases", "5"),
        *("--out", str(tmp_path / "R" / "fuzz"), "--alluredir", str(run.results)),
    ]
    given = pipeline.fuzz_argv(_args(tmp_path, "--pair", "p-9", "--fuzz-cases", "1"), run)
    assert given[5:8] == ["peer", "fuzz", "p-9"]


def test_the_fuzz_gets_the_agent_call_bound_the_suites_got(tmp_path: Path) -> None:
    # ci/nightly's debug lab: a cold agent there needs more than the default 30 s.
    run = history.new_run(tmp_path / "R")
    for bound in (["--hil-timeout-agent", "120"], ["--hil-timeout-agent=120"]):
        args = _args(tmp_path, "--fuzz-cases", "5", pytest_args=("-x", *bound))
        assert pipeline.fuzz_argv(args, run)[-2:] == ["--timeout-agent", "120"]


def test_the_pipeline_fuzzes_after_the_suites_into_the_same_results(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # The subprocesses (pytest, hil peer fuzz, the Allure generator) are the boundary.
    order: list[str] = []

    def suites(run: history.Run, args: argparse.Namespace) -> Finished:
        order.append("suites")
        write_categories(run.results)
        return Finished(0)

    def fuzz(run: history.Run, args: argparse.Namespace, left: float | None) -> Finished:
        order.append("fuzz")
        assert left is not None and 0 < left <= 100
        _finding(run.results, tmp_path)
        return Finished(EXIT_VIOLATION)

    def generate(found: Path, report: Path, allure: Path) -> None:
        order.append("generate")
        (report / "widgets").mkdir(parents=True)
        stat = {"failed": len(results.read(found))}
        (report / "widgets" / "summary.json").write_text(json.dumps({"statistic": stat}))

    monkeypatch.setattr(pipeline, "run_pytest", suites)
    monkeypatch.setattr(pipeline, "run_fuzz", fuzz)
    monkeypatch.setattr(pipeline, "generate", generate)
    args = _args(tmp_path, "--fuzz-cases", "3", "--fuzz-seed", "7", "--timeout", "100")
    args.pytest_args, args.thresholds = [], []
    assert pipeline.pipeline(args) == 1
    assert order == ["suites", "fuzz", "generate"]
    out = capsys.readouterr().out
    assert "0 passed, 1 failed" in out
    saved = tmp_path / "R" / "fuzz"
    assert (
        f"fuzz: seed 7, 3 cases: findings (category Fuzz findings); replay files in {saved}" in out
    )


def test_fuzz_cases_need_an_inventory_with_a_pair(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert pipeline.main(["--fuzz-cases", "2", "--inventory", ""]) == 1
    assert "--fuzz-cases needs --inventory" in capsys.readouterr().err
    empty = tmp_path / "empty.yaml"
    empty.write_text(INVENTORY.split("links:")[0])
    assert pipeline.main(["--fuzz-cases", "2", "--inventory", str(empty)]) == 1
    assert f"--fuzz-cases: {empty} has no pair to fuzz" in capsys.readouterr().err
