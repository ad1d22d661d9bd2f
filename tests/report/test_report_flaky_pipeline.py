"""Four nights through the real pipeline: allure-pytest, the plugin, the quarantine list, the
real Allure generator; the outcome history, the flip ranking and the Known flaky category.

The stand-in suite's outcomes depend on the night (a file beside it):

    test_steady  PPPP
    test_flips   PFPF   3 flips
    test_known   FPFF   2 flips, in the quarantine list: its failures do not fail the night
    test_lab     PLPL   lab errors: no flips
    test_late    ..PF   1 flip (collected from night 3 on)

test_steady records a metric (connect_us 1000, 1100, 1000, 2000 us) through
``hil_metrics``: the metrics history, the trend page and the threshold flags of
night 4 are checked too.
"""

from __future__ import annotations

import html
import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from urllib.request import urlopen

import pytest
from browser import chromium_missing, dump_dom, serve
from standin import needs_allure, run_nights
from test_report_e2e import _section

from hil.report import flaky, history, metrics_history
from hil.report.svgdraw import BAD_COLOR

SUITE = """
import pathlib

import pytest
from hil.errors import Unreachable

NIGHT = int(pathlib.Path(__file__).with_name("night").read_text())


def test_steady(hil_metrics):
    hil_metrics.record("connect_us", {1: 1000, 2: 1100, 3: 1000, 4: 2000}[NIGHT], "us")


def test_flips():
    assert NIGHT % 2 == 1, "connect timed out"


def test_known():
    assert NIGHT == 2, "the link came back too early"


def test_lab():
    if NIGHT % 2 == 0:
        raise Unreachable("lab-b", "no TCP connection within 10s; is the host up?")


if NIGHT >= 3:
    def test_late():
        assert NIGHT == 3, "late failure"
"""

KNOWN_FLAKY = """
- test: suites/test_night.py::test_known
  reason: the link comes back before siw notices
  issue: https://tracker.example/hil/42
  since: 2026-11-20
"""

NIGHTS = 4
THRESHOLDS = ["--threshold", "connect_us>+50%", "--threshold", "connect_us:p99>5000"]
THRESHOLDS += ["--threshold", "nothing_us>1"]
TEST = "suites/test_night.py::"
SVG = "{http://www.w3.org/2000/svg}"

pytestmark = needs_allure


@pytest.fixture(scope="module")
def nights(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[int]]:
    """The suite run on four nights; (reports dir, exit codes)."""
    files = {"test_night.py": SUITE, "known-flaky.yaml": KNOWN_FLAKY}
    nights = [str(night) for night in range(1, NIGHTS + 1)]
    argv = ["--keep", "2", *THRESHOLDS]
    return run_nights(tmp_path_factory.mktemp("nights"), files, "night", nights, argv)


def test_known_flaky_failures_do_not_fail_a_night(nights: tuple[Path, list[int]]) -> None:
    _, codes = nights
    assert codes == [0, 1, 0, 1]


def test_the_history_keeps_every_tests_outcome_per_night(nights: tuple[Path, list[int]]) -> None:
    reports, _ = nights
    assert [r.order for r in history.runs(reports)] == [3, 4]  # --keep 2 runs ...
    kept = flaky.load(reports / flaky.OUTCOMES_HISTORY)  # ... and the flaky window's nights
    by_test: dict[str, str] = {}
    for o in kept:
        by_test[o.test] = by_test.get(o.test, "") + o.letter
        assert o.pair is None and o.provider is None  # no pair in this stand-in
    assert by_test == {
        TEST + "test_steady": "PPPP",
        TEST + "test_flips": "PFPF",
        TEST + "test_known": "FPFF",
        TEST + "test_lab": "PLPL",
        TEST + "test_late": "PF",
    }
    known = [o for o in kept if o.test == TEST + "test_known"]
    assert all(o.known_flaky for o in known)
    assert [o.category for o in known] == ["Known flaky", None, "Known flaky", "Known flaky"]
    assert [o.run for o in kept if o.test == TEST + "test_late"] == [3, 4]
    assert len({o.night for o in kept}) == NIGHTS


def test_the_summary_ranks_the_flips_and_lists_known_flaky_failures(
    nights: tuple[Path, list[int]],
) -> None:
    reports, _ = nights
    summary = (reports / "latest" / "report" / flaky.SUMMARY_FILE).read_text().splitlines()
    assert summary[0].startswith("1 passed, 3 failed, 1 broken, 0 skipped; report ")
    assert summary[0].endswith("report/index.html; exit 1")
    assert summary[1] == (
        f"known flaky: 1 failed, reported apart, not failing the run: {TEST}test_known"
    )
    assert summary[2].startswith(
        "flaky: 3 tests flipped between pass and fail in the last 4 nights"
    )
    where = "(no pair, provider unknown)"
    assert summary[3:6] == [
        f"  3 flips  PFPF  {TEST}test_flips  {where}",
        f"  2 flips  FPFF  {TEST}test_known  {where} [known flaky]",
        f"  1 flip  ..PF  {TEST}test_late  {where}",
    ]
    page = reports / "runs" / "0004" / "report" / "metrics" / "index.html"
    assert summary[6:] == [
        f"metrics: 1 series recorded; trends {page}",
        "metrics: 1 past a threshold (3 thresholds):",
        "  connect_us mean 2 ms +100% against the median 1 ms of the nights before (+50%) "
        "(--threshold)",
        "  threshold matched no metric of this run: nothing_us (--threshold)",
        # x2 is flagged, but 1 ms is under the bound kind's 100 ms floor: the night passes
        "drift: none: 1 changed against the 3 nights before, 0 past a fail threshold",
        "  flagged bound: connect_us: 1000 -> 2000 (x2 the median of 3 nights)",
        "  on the pair since the night before: nothing changed in its environment",
    ]


def test_the_metrics_history_and_the_trend_page(nights: tuple[Path, list[int]]) -> None:
    reports, _ = nights
    kept = metrics_history.load(reports / metrics_history.HISTORY)
    assert [n.run for n in kept] == [1, 2, 3, 4]  # --metric-nights (30), not --keep (2)
    assert [n.series["connect_us"].mean for n in kept] == [1000, 1100, 1000, 2000]
    page = reports / "latest" / "report" / "metrics"
    svg = ET.fromstring((page / "connect_us.svg").read_text())
    dots = svg.findall(f"{SVG}circle")
    assert [d.findtext(f"{SVG}title", "").split(":")[0] for d in dots] == [
        "run 1", "run 2", "run 3", "run 4",
    ]  # fmt: skip
    assert dots[-1].get("stroke") == BAD_COLOR  # the flagged night is ringed
    assert "FLAGGED" in "".join(svg.itertext())
    assert "<svg" in (page / "index.html").read_text()


def test_the_report_shows_the_known_flaky_category_and_the_ranking(
    nights: tuple[Path, list[int]],
) -> None:
    reports, _ = nights
    report = reports / "latest" / "report"
    widget = json.loads((report / "widgets" / "categories.json").read_text())
    counts = {c["name"]: c["statistic"] for c in widget["items"]}
    assert counts["Known flaky"]["failed"] == 1 and counts["Known flaky"]["total"] == 1
    assert counts["Product failures"]["total"] == 2  # test_flips and test_late, not test_known
    assert counts["Lab / infrastructure errors"]["broken"] == 1
    cases = [json.loads(p.read_text()) for p in (report / "data" / "test-cases").glob("*.json")]
    known = next(c for c in cases if c["name"] == "test_known")
    assert known["flaky"] is True
    assert {"name": "tag", "value": "known-flaky"} in known["labels"]
    assert known["links"][0]["url"] == "https://tracker.example/hil/42"
    assert known["statusMessage"].startswith(
        "known flaky: the link comes back before siw notices (https://tracker.example/hil/42)\n"
        "AssertionError: the link came back too early"
    )
    assert [c["name"] for c in known["extra"]["categories"]] == ["Known flaky"]
    # Allure marks a test that flips in its own history flaky too; only the list sets it apart
    flips = next(c for c in cases if c["name"] == "test_flips")
    assert [c["name"] for c in flips["extra"]["categories"]] == ["Product failures"]
    env = {
        e["name"]: e["values"]
        for e in json.loads((report / "widgets" / "environment.json").read_text())
    }
    assert env["flaky"] == [
        "3 tests flipped between pass and fail in the last 4 nights "
        "(all in summary.txt beside index.html)"
    ]
    assert env["flaky.01"] == [f"3 flips  PFPF  {TEST}test_flips  (no pair, provider unknown)"]
    assert "flaky.04" not in env


@pytest.mark.skipif(chromium_missing() is not None, reason=str(chromium_missing()))
def test_the_overview_in_chromium_shows_the_category_and_the_flaky_lines(
    nights: tuple[Path, list[int]], tmp_path: Path
) -> None:
    reports, _ = nights
    with serve(reports / "latest" / "report") as base:
        overview = dump_dom(base + "index.html", tmp_path / "profile")
        summary = urlopen(base + flaky.SUMMARY_FILE, timeout=10).read().decode()
    categories = _section(overview, "categories")
    assert re.search(r">\s*Known flaky\s*<", categories)
    environment = _section(overview, "environment")
    assert re.search(r">\s*flaky\.01\s*<", environment)
    assert "3 flips  PFPF  suites/test_night.py::test_flips" in html.unescape(environment)
    assert "  2 flips  FPFF  suites/test_night.py::test_known" in summary  # published with it
