"""The report plugin in real pytest runs (pytester) writing real allure-pytest results."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from allureresults import all_attachments, results
from netnslab import NetnsLab

pytest_plugins = ["pytester"]

SVG = "{http://www.w3.org/2000/svg}"

CM_TESTS = Path(__file__).resolve().parents[1] / "cm"
RPING = Path(__file__).resolve().parents[1] / "data" / "wire" / "rping-siw.pcap"

LABELLED = """
import pytest
from hil.report.attach import metric, step

@pytest.mark.parametrize("mode", ["admin"])
@pytest.mark.parametrize("direction", ["a-b", "b-a"])
def test_pull(direction, mode):
    with step("pull the link", mode=mode, end="a"):
        metric("detection_us", 1500, "us")
"""

OBSERVED = """
import sys
sys.path.insert(0, {cm!r})

import pytest
from fake_cm import FakeCMWorld
from hil.cm.observer import Observers, RunInfo
from hil.judge.profiles import SIW
from hil.cm.session import CMSession
from hil.report.observer import AllureObserver

def session(world):
    observer = AllureObserver()
    observer.run_started(RunInfo("p", ("h0", "h1"), "lease-1", "siw", "siw"))
    return CMSession(world, world.pair, profile=SIW, observers=Observers([observer]))

def test_sequence_is_a_step_with_its_actions():
    session(FakeCMWorld()).run("abort", how="qp_err")

def test_a_failed_sequence_leaves_its_partial_timeline():
    world = FakeCMWorld()
    agent = world.agents["h1"]
    real = agent.call
    def call(method, timeout=30.0, **params):
        if params.get("op") == "accept":
            raise RuntimeError("agent went away")
        return real(method, timeout, **params)
    agent.call = call
    session(world).run("connect")
"""

ON_THE_PAIR = """
def test_ping_then_fail(hil_pair, hil_hosts):
    host = hil_pair.pair.host_a.name
    peer = str(hil_pair.pair.rnic_b.address.ip)
    hil_hosts.agent(host).run(["ping", "-c", "2", "-i", "0.2", "-W", "2", peer], check=True)
    assert False, "product failure on purpose"
"""


WIRE = """
import shutil

import pytest
from hil.report.plugin import OBSERVER_KEY, failed
from hil.run.observer import TestResult
from hil.judge.profiles import SIW
from hil.judge.timeline import Action, Timeline
from hil.wire.decode import decode
from hil.wire.judge import RuleResult, WireReport, WireVerdict, judge
from hil.wire.rule import Outcome

# What a TestRun tells the report's observer: rping between the lab's guests, decoded
# by tshark, placed at 1 ms on a timeline whose connect targets it; then the outcome.
@pytest.fixture
def wire(request, tmp_path):
    yield
    pcap = tmp_path / "guest1.pcap"
    shutil.copy({rping!r}, pcap)
    exchange = decode({{"guest1": pcap}})
    first = min(p.wall_us for c in exchange.connections for p in c.packets)
    exchange = exchange.placed({{"guest1": 1000 - first}}, {{"guest1": 150}})
    connect = Action(500, "a", "connect", "a:1", {{"dst": "198.18.0.2", "port": 7174}})
    timeline = Timeline("rping", "siw", ("guest1", "guest2"), (connect,))
    verdict = judge(exchange, [timeline], SIW)
    if "wire_fails" in request.node.name:
        verdict = WireVerdict("siw", (RuleResult("orderly-close-is-fin", Outcome("fail", "RST")),))
    report = WireReport({{"guest1": pcap}}, exchange, verdict, (timeline,))
    observer = request.config.stash[OBSERVER_KEY]
    observer.wire_verdict(report)
    outcome = "failed" if failed(request.node) else "passed"
    observer.test_finished(TestResult(request.node.nodeid, outcome, (), report, None, None, (), ()))

def test_passes(wire):
    pass

def test_fails(wire):
    assert False, "product failure on purpose"

def test_wire_fails(wire):
    pass
"""


def labels(result: dict[str, Any]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for label in result["labels"]:
        out.setdefault(label["name"], []).append(label["value"])
    return out


def test_labels_steps_metrics_and_run_files(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_link_pull=LABELLED)
    out = pytester.path / "allure"
    pytester.runpytest_subprocess(f"--alluredir={out}", "-p", "no:cacheprovider").assert_outcomes(
        passed=2
    )
    found = sorted(results(out), key=lambda r: r["name"])
    assert len(found) == 2
    for r in found:
        lab = labels(r)
        assert lab["suite"] == lab["parentSuite"] == ["link_pull"]  # not allure's defaults
        assert lab["subSuite"] == ["test_pull"]
        assert lab["pull_mode"] == ["admin"]
        assert lab["nodeid"][0].startswith("test_link_pull.py::test_pull[")  # pytest's id
        assert lab["direction"][0] in ("a-b", "b-a")
        step = r["steps"][0]
        assert step["name"] == "pull the link"
        assert {p["name"]: p["value"] for p in step["parameters"]} == {
            "mode": "'admin'",
            "end": "'a'",
        }
    metrics = json.loads((out / "hil-metrics.json").read_text())
    got = [(m["name"], m["value"], m["unit"]) for m in metrics]
    assert got == [("detection_us", 1500, "us")] * 2
    cats = json.loads((out / "categories.json").read_text())
    assert [c["name"] for c in cats][:6] == [
        "Known flaky",
        "Fuzz findings",
        "Host crashed",
        "Contract violations",
        "Wire rules broken",
        "Lab / infrastructure errors",
    ]
    assert json.loads((out / "executor.json").read_text())["type"] in ("local", "jenkins", "gitlab")
    assert "pair=none" in (out / "environment.properties").read_text()


def test_without_alluredir_the_helpers_are_quiet(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_link_pull=LABELLED)
    pytester.runpytest_subprocess("-p", "no:cacheprovider").assert_outcomes(passed=2)
    assert not list(pytester.path.glob("**/*-result.json"))


def test_an_observed_cm_session_reports_its_run(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_abort=OBSERVED.format(cm=str(CM_TESTS)))
    out = pytester.path / "allure"
    pytester.runpytest_subprocess(f"--alluredir={out}", "-p", "no:cacheprovider").assert_outcomes(
        passed=1, failed=1
    )
    by_name = {r["name"]: r for r in results(out)}
    (partial,) = by_name["test_a_failed_sequence_leaves_its_partial_timeline"]["steps"]
    assert partial["status"] == "broken"
    assert [a["name"] for a in partial["attachments"]] == [
        "timeline connect",
        "timeline connect (json)",
    ]
    assert [s["name"] for s in partial["steps"]][:1] == ["h1: listen b:1.1 -> ok"]
    (seq,) = by_name["test_sequence_is_a_step_with_its_actions"]["steps"]
    assert seq["name"] == "sequence abort"
    assert {p["name"] for p in seq["parameters"]} == {"direction", "how"}
    assert "h0: qp_err a:1.1 -> ok" in [s["name"] for s in seq["steps"]]
    names = {a["name"] for a in seq["attachments"]}
    assert {n for n in names if n.startswith("timeline abort")} == {
        "timeline abort-qp_err-active",
        "timeline abort-qp_err-active (json)",
    }
    assert any(n.startswith("contract verdict") for n in names)


def test_a_failed_test_on_the_pair_gets_labels_evidence_and_the_environment(
    pytester: pytest.Pytester, netns_lab: NetnsLab, tmp_path: Path
) -> None:
    pytester.makepyfile(test_pair=ON_THE_PAIR)
    out = tmp_path / "allure"
    run = pytester.runpytest_subprocess(
        "--hil-inventory",
        str(netns_lab.inventory_path),
        "--hil-store",
        str(tmp_path / "s.db"),
        f"--alluredir={out}",
        "-p",
        "no:cacheprovider",
    )
    run.assert_outcomes(failed=1)
    (r,) = results(out)
    lab = labels(r)
    # The test never set the pair up, so no provider was observed: the label says
    # so, and the inventory's claim (siw) does not stand in for one.
    assert lab["pair"] == ["ns0-ns1"]
    assert lab["provider"] == ["unknown: the pair was not set up before this test"]
    env = (out / "environment.properties").read_text()
    assert "pair=ns0-ns1" in env and "ns0.data0.driver=veth" in env
    # A test that does not set the pair up runs outside a TestRun: no evidence is taken.
    assert not [a for a in all_attachments(out, r) if a["name"].startswith("evidence")]


@pytest.mark.parametrize("pcap", ["failed", "all", "none"])
def test_the_wire_hook_attaches_verdict_exchange_picture_and_the_kept_captures(
    pytester: pytest.Pytester, pcap: str
) -> None:
    pytester.makepyfile(test_wire=WIRE.format(rping=str(RPING)))
    out = pytester.path / "allure"
    pytester.runpytest_subprocess(
        f"--alluredir={out}", f"--hil-pcap={pcap}", "-p", "no:cacheprovider"
    ).assert_outcomes(passed=2, failed=1)
    by_name = {r["name"]: all_attachments(out, r) for r in results(out)}
    for name, attachments in by_name.items():
        names = {a["name"]: a for a in attachments}
        word = "FAILED" if name == "test_wire_fails" else "passed"
        assert {f"wire verdict: {word}", "wire verdict (json)"} <= set(names)
        assert json.loads((out / names["wire verdict (json)"]["source"]).read_text())["ok"] == (
            word == "passed"
        )
        text = (out / names["wire exchange"]["source"]).read_text()
        assert "|-------------- SYN -------------->|" in text  # the ladder
        assert "#3@guest1 198.18.0.1:44668 > 198.18.0.2:7174 SYN" in text  # every packet
        exchange = json.loads((out / names["wire exchange (json)"]["source"]).read_text())
        assert exchange["points"] == ["guest1"]
        svg = names["timeline rping with the wire"]
        assert svg["type"] == "image/svg+xml"
        root = ET.fromstring((out / svg["source"]).read_text())
        crossings = [
            g.get("data-label") for g in root.iter(f"{SVG}g") if g.get("class") == "crossing"
        ]
        assert crossings[:4] == ["SYN", "SYN-ACK", "MPA request", "MPA reply"]
        pcaps = [a for a in attachments if a["type"] == "application/vnd.tcpdump.pcap"]
        kept = pcap == "all" or (pcap == "failed" and name != "test_passes")
        assert [a["name"] for a in pcaps] == (["guest1.pcap"] if kept else [])
        for a in pcaps:
            assert (out / a["source"]).read_bytes() == RPING.read_bytes()
