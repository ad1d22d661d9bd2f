"""A real pytest run, the pipeline twice, the real Allure generator, the report in Chromium.

The suites here are small stand-ins (two modules, one test failing with a
contract violation and its timeline attached, one product failure, one lab
error); the pipeline, allure-pytest,
the plugin, the generator and the browser are the real ones.  Screenshots go
to artifacts/report-test/ (and their paths are printed).
"""

from __future__ import annotations

import json
import re
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path
from urllib.request import urlopen

import pytest
from browser import chromium_missing, dump_dom, screenshot, serve

from hil.report import history, pipeline

JUDGE_TESTS = Path(__file__).resolve().parents[1] / "judge"
REPORT_TESTS = Path(__file__).resolve().parent
ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts" / "report-test"

CLOSE_SUITE = """
import sys
import pytest
sys.path.insert(0, {cm!r})
import cmtimelines
from hil.judge.contract import check
from hil.judge.profiles import profile_for
from hil.report.attach import attach_timeline, attach_verdict, metric, step


@pytest.mark.parametrize("direction", ["a-to-b", "b-to-a"])
def test_orderly_close(direction):
    tl = cmtimelines.orderly_close()
    with step("disconnect", side="a", id="a:1"):
        pass
    metric("connect_latency", 7.0, "ms")
    verdict = check(tl, profile_for("siw"))
    attach_timeline(tl, verdict)
    attach_verdict(verdict)
    assert verdict.ok, verdict.to_text()


def test_needs_a_second_pair():
    pytest.skip("the pair has no second link")
"""

ABORT_SUITE = """
import sys
sys.path.insert(0, {cm!r})
sys.path.insert(0, {report!r})
import cmtimelines
import wireexchanges
from hil.judge.contract import check
from hil.judge.profiles import profile_for
from hil.errors import Unreachable
from hil.report.attach import attach_timeline, attach_wire_timeline
from hil.wire.judge import judge


def test_qp_err_close():
    # the initiator must see status 0
    tl = wireexchanges.with_target(cmtimelines.qp_err_close("siw", -110, 0))
    verdict = check(tl, profile_for("siw"))
    attach_timeline(tl, verdict)
    exchange = wireexchanges.aborted()  # a TERMINATE and an RST on the wire
    attach_wire_timeline(tl, exchange, judge(exchange, [tl], profile_for("siw")), verdict)
    assert verdict.ok, verdict.to_text()


def test_destroy_returns():
    assert 2 + 2 == 5, "destroy blocked for 30 s"


def test_lab_host_down():
    raise Unreachable("lab-b", "no TCP connection within 10s; is the host up?")
"""

pytestmark = pytest.mark.skipif(
    chromium_missing() is not None or not pipeline.DEFAULT_ALLURE.exists(),
    reason="needs chromium and the Allure generator in .tools (ci/install installs both)",
)


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[int]]:
    """The stand-in suites run twice through the pipeline; (reports dir, exit codes)."""
    work = tmp_path_factory.mktemp("e2e")
    suites = work / "suites"
    suites.mkdir()
    (suites / "test_close.py").write_text(CLOSE_SUITE.format(cm=str(JUDGE_TESTS)))
    (suites / "test_abort.py").write_text(
        ABORT_SUITE.format(cm=str(JUDGE_TESTS), report=str(REPORT_TESTS))
    )
    reports = work / "reports"
    codes = [
        pipeline.main(
            [str(suites), "--reports", str(reports), "--keep", "5", "--", "-q", f"--rootdir={work}"]
        )  # nodeids suites/test_*.py, as in hil
        for _ in range(2)
    ]
    return reports, codes


def _section(dom: str, widget: str) -> str:
    start = dom.index(f'data-id="{widget}"')
    end = dom.find('data-id="', start + 10)
    return dom[start : end if end > 0 else None]


def _failed_case(report: Path) -> tuple[str, dict[str, str]]:
    """(test case uid, {name: uid} of its SVG attachments) of the contract failure."""
    for path in (report / "data" / "test-cases").glob("*.json"):
        case = json.loads(path.read_text())
        if case["name"] == "test_qp_err_close":
            atts = [a for s in [case["testStage"]] for a in s["attachments"]]
            return case["uid"], {a["name"]: a["uid"] for a in atts if a["type"] == "image/svg+xml"}
    raise AssertionError("the report has no test_qp_err_close")


def _embedded_svg(base: str, page: str, profile: Path) -> ET.Element:
    """The SVG picture the test page embeds, as Allure serves it."""
    dom = dump_dom(page, profile)
    embed = re.search(r'<object[^>]*type="image/svg\+xml"[^>]*data="([^"]+)"', dom)
    assert embed is not None, "the timeline picture is not embedded in the test page"
    with urlopen(base + embed.group(1), timeout=10) as resp:
        return ET.fromstring(resp.read())


def test_the_pipeline_exits_1_on_a_test_failure_and_keeps_both_runs(
    two_runs: tuple[Path, list[int]],
) -> None:
    reports, codes = two_runs
    assert codes == [1, 1]
    kept = history.runs(reports)
    assert [r.order for r in kept] == [1, 2]
    assert (reports / "latest").resolve() == kept[-1].path.resolve()
    assert history.summary(kept[-1].report) == history.Summary(2, 2, 1, 1)
    assert (kept[-1].results / "history" / "history-trend.json").is_file()


def test_the_report_shows_suites_trend_and_the_failed_timeline_in_chromium(
    two_runs: tuple[Path, list[int]], tmp_path: Path
) -> None:
    reports, _ = two_runs
    report = history.runs(reports)[-1].report
    case_uid, svgs = _failed_case(report)
    with serve(report) as base:
        overview = dump_dom(base + "index.html", tmp_path / "profile")
        suites = _section(overview, "suites")
        assert re.search(r">\s*abort\s*<", suites) and re.search(r">\s*close\s*<", suites)
        trend = _section(overview, "history-trend")
        assert "chart__svg" in trend and ">#1<" in trend and ">#2<" in trend
        categories = _section(overview, "categories")
        for name in ("Contract violations", "Product failures", "Lab / infrastructure errors"):
            assert name in categories

        page = f"{base}index.html#testresult/{case_uid}?attachment="
        svg = _embedded_svg(base, page + svgs["timeline abort"], tmp_path / "profile")
        lanes = [g.get("data-host") for g in svg.iter("{http://www.w3.org/2000/svg}g")]
        assert lanes == ["lab-a (a)", "lab-b (b)"]
        wire_page = page + svgs["timeline abort with the wire"]
        wire = _embedded_svg(base, wire_page, tmp_path / "profile")
        labels = [g.get("data-label") for g in wire.iter("{http://www.w3.org/2000/svg}g")]
        assert "TERMINATE DDP" in labels and "RST" in labels

        shots = [
            screenshot(base + "index.html", tmp_path / "overview.png", tmp_path / "p2"),
            screenshot(
                page + svgs["timeline abort"],
                tmp_path / "failed-timeline.png",
                tmp_path / "p3",
                "1400,1200",
            ),
            screenshot(wire_page, tmp_path / "wire-timeline.png", tmp_path / "p4", "1400,1200"),
        ]
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    for shot in shots:
        assert shot.stat().st_size > 10_000  # a blank page is a few KiB
        kept = shutil.copy(shot, ARTIFACTS / shot.name)
        print(f"screenshot: {kept}")
