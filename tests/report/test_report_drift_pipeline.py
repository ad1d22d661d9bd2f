"""Two nights through the real pipeline (what ci/nightly runs once it has an inventory):
allure-pytest, the report plugin, the real Allure generator, the drift history.

A stand-in suite replays one test's recorded behaviour: a rejected connect's timeline
(its REJECTED status, its connect_us) attached in the call, and the wire exchange (an MPA
request) attached in a fixture's tear-down, as the TestRun's wire stage does. A conftest
adds what the report plugin reads on a real pair: the pair's name, kernel and firmware.

    night 1: REJECTED -104, connect_us 1000, firmware 1.0   no history yet: exit 0
    night 2: REJECTED -111, connect_us 1100, firmware 1.1   the status flagged and failing,
                                                            beside the firmware: exit 1
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from standin import needs_allure, run_nights

from hil.report import drift_history, flaky

SUITE = """
import json, pathlib
import pytest
from hil.judge.records import Event
from hil.judge.timeline import Timeline
from hil.report.attach import attach_exchange, attach_timeline
from hil.wire.model import Connection, Exchange, Mpa, Packet

NIGHT = json.loads(pathlib.Path(__file__).with_name("night.json").read_text())
A, B = ("198.18.0.1", 40000), ("198.18.0.2", 7174)


@pytest.fixture
def wire():
    yield
    mpa = Mpa("request", 2, False, NIGHT["crc"], False, True, "", "00010001", 1, 1)
    packet = Packet(4, "lab-a", 1800, A, B, frozenset({"ACK", "PSH"}), seq=1, length=24, mpa=mpa)
    attach_exchange(Exchange((Connection(A, B, (packet,)),), points=("lab-a",)))


def test_reject(wire):
    events = (
        Event("lab-b", "b", 500, 500, "CONNECT_REQUEST", id="b:2", seq=1),
        Event("lab-a", "a", 900, 900, "REJECTED", status=NIGHT["status"], id="a:1", seq=1),
    )
    metrics = {"connect_us": NIGHT["connect_us"]}
    attach_timeline(Timeline("reject", "siw", ("lab-a", "lab-b"), events=events, metrics=metrics))
"""

CONFTEST = """
import json, pathlib
import pytest
from hil.report.environment import write_properties

NIGHT = json.loads(pathlib.Path(__file__).with_name("night.json").read_text())


@pytest.hookimpl(trylast=True)  # after the report plugin wrote environment.properties
def pytest_sessionfinish(session):
    props = {"pair": "vpair", "lab-a.kernel": "6.1.0-28-amd64"}
    props["lab-a.data0.firmware"] = NIGHT["firmware"]
    write_properties(pathlib.Path(session.config.getoption("allure_report_dir")), props, "end")
"""

NIGHTS = [
    {"status": -104, "connect_us": 1000, "crc": False, "firmware": "1.0"},
    {"status": -111, "connect_us": 1100, "crc": False, "firmware": "1.1"},
]
TEST = "suites/test_night.py::test_reject"

pytestmark = needs_allure


@pytest.fixture(scope="module")
def nights(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[int]]:
    """The stand-in run on both nights; (reports dir, exit codes)."""
    files = {"test_night.py": SUITE, "conftest.py": CONFTEST}
    nights = [json.dumps(night) for night in NIGHTS]
    return run_nights(tmp_path_factory.mktemp("drift"), files, "night.json", nights)


def test_the_changed_status_fails_the_second_night(nights: tuple[Path, list[int]]) -> None:
    _, codes = nights
    assert codes == [0, 1]  # the test passed both nights: the drift alone failed night 2


def test_the_first_night_has_no_history_yet(nights: tuple[Path, list[int]]) -> None:
    reports, _ = nights
    summary = (reports / "runs" / "0001" / "report" / flaky.SUMMARY_FILE).read_text()
    assert "drift: vpair: no history yet (tonight is its first night)\n" in summary


def test_the_summary_names_the_change_beside_the_firmware(nights: tuple[Path, list[int]]) -> None:
    reports, _ = nights
    summary = (reports / "latest" / "report" / flaky.SUMMARY_FILE).read_text().splitlines()
    assert summary[0].endswith("exit 1") and summary[0].startswith("1 passed, 0 failed")
    at = summary.index("drift: vpair: 1 changed against the night before, 1 past a fail threshold")
    assert summary[at + 1 :] == [
        f"  FAILS status: {TEST} reject a REJECTED: -104 -> -111 (no night of 1 before had it)",
        "  on the pair since the night before:",
        "    lab-a.data0.firmware: 1.0 -> 1.1",
    ]  # connect_us 1000 -> 1100 is inside the bound kind's 1.5x: not flagged


def test_the_overview_names_the_change(nights: tuple[Path, list[int]]) -> None:
    reports, _ = nights
    widget = reports / "latest" / "report" / "widgets" / "environment.json"
    env = {e["name"]: e["values"] for e in json.loads(widget.read_text())}
    assert env["drift"] == ["vpair: 1 changed against the night before, 1 past a fail threshold"]
    assert env["drift.01"][0].startswith(f"FAILS status: {TEST} reject a REJECTED")
    assert env["drift.stack"] == ["lab-a.data0.firmware: 1.0 -> 1.1"]


def test_the_history_keeps_each_nights_record(nights: tuple[Path, list[int]]) -> None:
    reports, _ = nights
    kept = drift_history.load(reports / "drift" / "vpair", 7)
    assert kept.skipped == () and [n.run for n in kept.nights] == [1, 2]
    first, second = kept.nights
    assert first.values["wire"] == {
        f"{TEST} tcp flags": "ACK,PSH",
        **{f"{TEST} mpa request.{f}": v for f, v in [("revision", "2"), ("marker", "false")]},
        **{f"{TEST} mpa request.{f}": v for f, v in [("crc", "false"), ("reject", "false")]},
        **{f"{TEST} mpa request.{f}": v for f, v in [("enhanced", "true"), ("ird", "1")]},
        f"{TEST} mpa request.ord": "1",
    }  # from the tear-down's attachment (a container of the result)
    assert first.values["status"][f"{TEST} reject b CONNECT_REQUEST"] == "0"
    assert second.values["bound"] == {"connect_us{scenario=reject}": 1100.0}
    assert second.stack["lab-a.kernel"] == "6.1.0-28-amd64"
