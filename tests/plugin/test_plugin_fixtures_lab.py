"""A test directory of a lab's own, with only ``-p hil`` and an inventory, gets the CM fixtures.

On the session's virtual lab (real siw guests): ``cm``, ``profile``,
``contract`` and ``direction`` come from the plugin itself, not from a
conftest.py copied out of suites/; and every test on the pair is captured
and judged by the wire rules, a lab's own rule among them; the test that
fails on the wire carries both guests' real ``ethtool -S`` changes in its
Allure result (and says siw has no debugfs).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from vlab import VirtualLab

from tests.report.allureresults import all_attachments, assert_siw_guests_evidence, results

pytest_plugins = ["pytester"]
pytestmark = pytest.mark.lab

OWN_SUITE = """
def test_connect_is_judged_by_the_pairs_profile(cm, profile, contract, direction):
    assert profile.name == "siw"
    assert cm.direction == direction
    verdict = contract(cm.run("connect"))
    assert verdict.ok and verdict.profile == "siw"
"""


def assert_timelines_and_verdicts_attached_once(
    alluredir: Path, test: str, scenarios: tuple[str, ...]
) -> None:
    """Each scenario's timeline (picture and JSON) once, and one verdict per timeline:
    the one ``cm.run`` judged and the one the test recorded and judged itself."""
    (result,) = [r for r in results(alluredir) if r["name"].startswith(test)]
    names = [a["name"] for a in all_attachments(alluredir, result)]
    for scenario in scenarios:
        for name in (f"timeline {scenario}", f"timeline {scenario} (json)"):
            assert names.count(name) == 1, f"{name!r} attached {names.count(name)} times: {names}"
    verdicts = names.count("contract verdict: passed")
    assert verdicts == len(scenarios), f"{verdicts} verdicts for {scenarios}: {names}"


def _on_the_lab(lab: VirtualLab, tmp_path: Path) -> list[str]:
    """The arguments of a pytest run with only ``-p hil`` on the lab's inventory."""
    inventory, store = str(lab.inventory.path), str(tmp_path / "store.db")
    return ["-p", "hil", "--hil-inventory", inventory, "--hil-store", store]


# A lab's own wire rule, registered from its conftest.py: it fails a test whose capture
# holds an MPA request, so the test below must fail on the wire, naming it.
WIRE_CONFTEST = """
from hil.wire.rule import Outcome, WireFinding, WireRule, evidence
from hil.wire.rules import register_wire_rule

def no_mpa_request(case):
    found = [WireFinding("an MPA request", c.name, evidence(c.mpa("request")))
             for c in case.exchange.connections if c.mpa("request")]
    return Outcome("fail", "seen", tuple(found)) if found else Outcome("n/a", "none")

register_wire_rule(WireRule("lab-no-mpa-request", "no MPA request", no_mpa_request,
                            needs_timeline=False))
"""

WIRE_SUITE = """
import pytest
from hil.cm import steps

@pytest.mark.parametrize(("direction", "family"), [("a-b", "ipv4")])
def test_connect(cm, contract, direction):
    contract(cm.run("connect"))
    with cm.recording("own-listen") as rec:  # recorded by the test itself
        listener = steps.listen(rec, cm.passive)
        steps.destroy(listener.ep, listener.id)
    contract(rec.timeline())
"""


def test_every_test_is_judged_on_the_wire_and_an_own_suite_gets_the_cm_fixtures(
    pytester: pytest.Pytester, virtual_lab: VirtualLab, tmp_path: Path
) -> None:
    pytester.makeconftest(WIRE_CONFTEST)
    pytester.makepyfile(test_wire=WIRE_SUITE)
    args = [*_on_the_lab(virtual_lab, tmp_path), "-p", "no:cacheprovider"]
    out = tmp_path / "allure"
    result = pytester.runpytest_subprocess(*args, f"--alluredir={out}", timeout=600)
    # The test itself passed its contract; its teardown fails on the lab's wire rule,
    # which names the connection and the MPA request packet the capture holds.
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(
        [
            "*wire FAILED: profile siw*",
            "*[[]lab-no-mpa-request] fail: seen*",
            "*packet #*@* > *:* ACK,PSH MPA request*",
        ]
    )
    result.stdout.no_fnmatch_line("*[[]orderly-close-is-fin] fail*")
    assert_siw_guests_evidence(out, "test_connect")  # failed: its hardware evidence attached
    assert_timelines_and_verdicts_attached_once(out, "test_connect", ("connect", "own-listen"))
    # With the wire judge off, the lab's rule fails nothing; the same session (one
    # pair setup for both) runs a suite that uses the plugin's CM fixtures and nothing
    # else: one test per direction (a-b, b-a) and address family the lab's link offers,
    # but for the a-b ones, which a known finding says stop the lab's kernel.
    pytester.makepyfile(test_own_suite=OWN_SUITE)
    findings = tmp_path / "known.yaml"
    findings.write_text(CRASHER)
    off = pytester.runpytest_subprocess(
        *args,
        "--hil-wire",
        "off",
        "--hil-known-kernel-findings",
        str(findings),
        "--rootdir",  # the entry's node id is under it
        str(pytester.path),
        "-rs",
        timeout=600,
    )
    families = len(virtual_lab.pair.families)
    off.assert_outcomes(passed=1 + families, skipped=families)
    off.stdout.fnmatch_lines(["*hil: not run: known kernel finding lab-crasher stops 6.*"])


# An entry that says its report stops the kernel (``crashes``): the plugin skips the
# tests it names on the kernels it names, without setting them going.
CRASHER = """
- id: lab-crasher
  title: "BUG: kernel NULL pointer dereference"
  frames: [f]
  kernels: ["6.1", "6.12"]  # the lab's kernels
  tests: ["test_own_suite.py::test_connect_is_judged_by_the_pairs_profile[a-b]"]
  upstream: docs/findings/siw-mpa-reply-pdlen-null-deref.md
  status: a test's own
  crashes: true
"""
