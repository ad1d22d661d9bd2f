"""The nightly layer through the real pipeline (hil.report.pipeline, what ci/nightly runs):
a stand-in suite whose test hangs, a real hil session (an inventory, a SQLite store; the
test touches no host), the real Allure generator.

The nightly's bound sends SIGTERM; the session restores (its fixture's teardown runs)
and gives its lease back; the pipeline says which layer fired and exits 3.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hil.report import pipeline
from hil.report.categories import category_of
from hil.reservation import open_store

pytestmark = pytest.mark.skipif(
    not pipeline.DEFAULT_ALLURE.exists(),
    reason="needs the Allure generator in .tools (ci/install installs it)",
)

INVENTORY = """\
hosts:
  h1:
    ssh: {host: 127.0.0.1, port: 22}
    rnics: [{name: p0, netdev: data0, driver: siw, speed: 10000}]
  h2:
    ssh: {host: 127.0.0.1, port: 22}
    rnics: [{name: p0, netdev: data0, driver: siw, speed: 10000}]
links:
  pair-1:
    ends: [h1:p0, h2:p0]
"""

SUITE = """
import os, pathlib, time, pytest
from hil.reservation import open_store

OUT = pathlib.Path(__file__).with_name("out")

@pytest.fixture(scope="session")
def pair():  # no hil_pair: its fixtures would connect to the hosts
    yield
    OUT.write_text(OUT.read_text() + "restored\\n")

def test_quick(pair):
    with open_store(os.environ["STORE"]) as s:
        OUT.write_text(f"quick, {len(s.leases())} lease held\\n")

def test_hangs(pair):
    time.sleep(120)
"""


def test_a_nightly_past_its_bound_stops_the_run_cleanly_and_says_which_layer_fired(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    suites = tmp_path / "suites"
    suites.mkdir()
    (suites / "test_stand_in.py").write_text(SUITE)
    inventory = tmp_path / "lab.yaml"
    inventory.write_text(INVENTORY)
    store = tmp_path / "s.db"
    monkeypatch.setenv("STORE", str(store))
    argv = [str(suites), "--reports", str(tmp_path / "reports"), "--inventory", str(inventory)]
    # 20 s: the nested pytest must have reached test_hangs before the bound fires (with
    # 6 s, a loaded CI machine's SIGTERM came before pytest's handler, exit -15).
    argv += ["--timeout", "20", "--", "-q", f"--rootdir={tmp_path}", f"--hil-store={store}"]
    # The session layer (tested on its own) out of the way, whatever the machine's load.
    assert pipeline.main([*argv, "--hil-timeout-session=600"]) == 3
    err = capsys.readouterr().err
    assert "--hil-timeout-session=15" not in err  # the one given wins
    assert (
        f"hil report: timeout (nightly layer, 20 s: --timeout) waiting for pytest on {suites} "
        "(run 1): sent SIGTERM, on which the session restores the pair; it ended (exit 2)"
    ) in err
    assert (suites / "out").read_text() == "quick, 1 lease held\nrestored\n"
    # The interrupted test fails saying so (Allure would otherwise show it passed).
    results = {
        r["name"]: r
        for p in (tmp_path / "reports" / "runs" / "0001" / "results").glob("*-result.json")
        if (r := json.loads(p.read_text()))
    }
    assert results["test_quick"]["status"] == "passed"
    assert results["test_hangs"]["status"] == "failed"
    assert results["test_hangs"]["statusDetails"]["message"].startswith(
        "Failed: hil: Interrupted: signal 15 (SIGTERM): restoring before exit, in its call; "
        "the session stops after it"
    )
    assert category_of("failed", results["test_hangs"]["statusDetails"]["message"]) == (
        "Lab / infrastructure errors"
    )
    with open_store(str(store)) as s:
        assert s.leases() == []


def test_inside_a_nightly_the_session_layer_stops_the_tests_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    suites = tmp_path / "suites"
    suites.mkdir()
    (suites / "test_one.py").write_text("def test_one():\n    pass\n")
    argv = [str(suites), "--reports", str(tmp_path / "reports"), "--timeout", "20"]
    assert pipeline.main([*argv, "--", "-q", f"--rootdir={tmp_path}"]) == 0
    # 20 s less a quarter (at most 600 s: hil.timeouts.session_bound).
    assert "--hil-timeout-session=15" in capsys.readouterr().err
