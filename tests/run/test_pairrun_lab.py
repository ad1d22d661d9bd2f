"""One pair run, one verdict: ``hil cm run`` and pytest judge the same pair alike.

Both run the close in a TestRun (hil/run/testrun.py): the contract verdict,
every wire rule's outcome and the after-test evidence must agree.

On the session's virtual lab (real siw guests), for the lab's own inventory
(siw) and for one that claims host A's port is Chelsio (``driver: iw_cxgb4``,
device ``cxgb4_0``) and host B's Intel (``driver: irdma``, device ``irdma0``),
both absent, so setup falls back to siw on each host, each saying what it was told
(one run for both claims: each nested run sets the pair up, about 15 s):
both ways must find the provider that really runs (siw), build the same
profile from the hosts' own settings, and reach the same verdict on an
orderly close.  The pytest side is the shipped suite ``suites/test_close.py``;
its verdicts are taken by an observer registered through the plugin's
``pytest_hil_observers`` hook, so the test also shows that hook at work.
What really runs is what every output says: the session's line once the
pair is set up, the Allure ``provider`` label and ``environment.properties``
say siw, and a siw fallback for an inventory that claims another driver says so.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from vlab import VirtualLab

pytestmark = pytest.mark.lab

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 600.0  # a TCG pair: setup, agents warm-up, one close each way

OBSERVER_PLUGIN = """
import json, os
from hil.run.observer import Observer

class Verdicts(Observer):
    def wire_verdict(self, report):
        self._write({"wire": {r.rule: r.outcome.status for r in report.verdict.results}})
    def evidence(self, report):
        self._write({"evidence": None if report.check is None else report.check.ok})
    def run_started(self, info):
        self._write({"run": info.provider, "profile": info.profile})
    def verdict(self, timeline, verdict):
        self._write({"scenario": timeline.scenario, "profile": verdict.profile,
                     "ok": verdict.ok, "rules": list(verdict.rules)})
    def _write(self, doc):
        with open(os.environ["VERDICTS"], "a") as f:
            f.write(json.dumps(doc) + "\\n")

def pytest_hil_observers(config):
    return [Verdicts()]
"""


# The RDMA device each claimed driver would name (absent on the lab's guests).
CLAIMED_DEVICE = {"iw_cxgb4": "cxgb4_0", "irdma": "irdma0"}


def _claiming(lab: VirtualLab, drivers: dict[str, str], path: Path) -> Path:
    """The lab's inventory with each host's port claimed to be the RNIC of the driver
    ``drivers`` names for it (without the lab's blackhole pull, which the inventory
    refuses on a TCP-offloading port)."""
    doc = yaml.safe_load(Path(lab.inventory.path).read_text())
    for end, driver in drivers.items():
        for rnic in doc["hosts"][end]["rnics"]:
            rnic.update(driver=driver, rdma_device=CLAIMED_DEVICE[driver])
    link = doc["links"][lab.pair.name]
    link["pull"] = [p for p in link["pull"] if p["mode"] != "blackhole"]
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def _properties(path: Path) -> dict[str, str]:
    """An ``environment.properties`` file (the writer escapes ``\\``, ``:`` and ``=``)."""
    props = {}
    for line in path.read_text().splitlines():
        key, _, value = line.replace("\\:", ":").partition("=")
        props[key] = value.replace("\\=", "=")
    return props


def _labels(alluredir: Path, name: str) -> set[str]:
    """The values of label ``name`` on every Allure result in ``alluredir``."""
    results = [json.loads(p.read_text()) for p in alluredir.glob("*-result.json")]
    assert results, f"no Allure result in {alluredir}"
    return {lb["value"] for r in results for lb in r.get("labels", []) if lb["name"] == name}


def _run(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            argv, capture_output=True, text=True, timeout=TIMEOUT, env=env, cwd=ROOT, check=False
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"{' '.join(argv[:6])} ... did not finish within {TIMEOUT:.0f} s")


@pytest.mark.parametrize("claims", ["siw", "iw_cxgb4+irdma"])
def test_cli_and_pytest_give_the_same_profile_and_verdict(
    virtual_lab: VirtualLab, tmp_path: Path, claims: str
) -> None:
    hosts = (virtual_lab.pair.host_a.name, virtual_lab.pair.host_b.name)
    # What the inventory says each host's port is: one driver for both, or one each.
    drivers = claims.split("+")
    claim = dict(zip(hosts, drivers * 2 if len(drivers) == 1 else drivers, strict=True))
    fallback = claims != "siw"
    inventory = (
        _claiming(virtual_lab, claim, tmp_path / "claims.yaml")
        if fallback
        else Path(virtual_lab.inventory.path)
    )
    store = str(tmp_path / "store.db")
    pair = virtual_lab.pair.name
    (tmp_path / "verdicts_plugin.py").write_text(OBSERVER_PLUGIN)
    verdicts = tmp_path / "verdicts.jsonl"
    alluredir = tmp_path / "allure"
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT}", "VERDICTS": str(verdicts)}

    cli = _run(
        [
            sys.executable,
            "-m",
            "hil",
            "--inventory",
            str(inventory),
            "--store",
            store,
            "cm",
            "run",
            "close",
            "--pair",
            pair,
            "--json",
        ],
        env,
    )
    assert cli.returncode == 0, f"hil cm run close failed:\n{cli.stdout}\n{cli.stderr}"
    doc: dict[str, Any] = json.loads(cli.stdout)
    assert doc["provider"]["driver"] == "siw"
    assert [h["fallback"] for h in doc["provider"]["hosts"]] == [fallback] * 2

    suite = _run(
        [
            sys.executable,
            "-m",
            "pytest",
            "suites/test_close.py",
            "-p",
            "verdicts_plugin",
            "-k",
            "test_orderly_close_disconnects_both_sides and a-b and active",
            "--hil-inventory",
            str(inventory),
            "--hil-store",
            store,
            "--hil-pair",
            pair,
            "--hil-family",  # the CLI's default: the first family the pair offers
            "ipv4",
            "--alluredir",
            str(alluredir),
            "-p",
            "no:cacheprovider",
            "-q",
        ],
        env,
    )
    assert suite.returncode == 0, f"the close suite failed:\n{suite.stdout}\n{suite.stderr}"
    lines = [json.loads(line) for line in verdicts.read_text().splitlines()]
    started = [x for x in lines if "run" in x]
    judged = [x for x in lines if "scenario" in x]
    assert started == [{"run": "siw", "profile": doc["verdict"]["profile"]}], lines
    assert len(judged) == 1, lines
    assert judged[0]["profile"] == doc["verdict"]["profile"]
    assert judged[0]["ok"] is doc["verdict"]["ok"] is True
    assert judged[0]["rules"] == doc["verdict"]["rules"]
    # The same wire and evidence verdicts: the CLI goes through the same TestRun.
    (wire,) = [x["wire"] for x in lines if "wire" in x]
    cli_wire = {r["rule"]: r["outcome"]["status"] for r in doc["wire"]["results"]}
    assert wire == cli_wire, (wire, cli_wire)
    assert "fail" not in wire.values() and "pass" in wire.values(), wire
    assert [x["evidence"] for x in lines if "evidence" in x] == [doc["evidence"]["ok"]] == [True]
    assert doc["outcome"] == "passed" and doc["ok"] is True, doc["failures"]

    # What runs is siw, and every output of the run says so (the fallback too).
    notes = "; ".join(f"siw fallback on {h}: the inventory says {claim[h]}" for h in hosts)
    said = f"hil: pair {pair} runs siw on both hosts" + (f" ({notes})" if fallback else "")
    assert f"{said}; judged by profile siw" in suite.stdout, suite.stdout
    assert _labels(alluredir, "provider") == {"siw"}
    props = _properties(alluredir / "environment.properties")
    assert (props["provider"], props["profile"]) == ("siw", "siw"), props
    for host in hosts:
        assert props[f"{host}.provider"].startswith("siw on "), props
        note = f"(siw fallback on {host}: the inventory says {claim[host]})"
        assert props[f"{host}.provider"].endswith(note) is fallback, props
