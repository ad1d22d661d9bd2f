"""The DUT's iWARP protocol handling, tested from the wire by the reference peer (issue 26).

One test per built-in peer scenario (hil/peer/builtin.py) and ``direction``: in
"a-b" host A is the DUT and host B runs the peer, in "b-a" the other way round.
The DUT's actions run on its normal CM endpoint; the peer's frames and the DUT's
reaction are judged against the DUT's provider's expectation
(hil/judge/peerexpect.py, each failure citing its source; hil/peer/judge.py).
Then the DUT must still accept a normal connection (the ``connect`` sequence,
the DUT passive, judged by the contract), and the after-test checks (kernel log,
resources) run on both hosts as for every suite test (the TestRun's exit).

Scenarios named in ``IPV4_ONLY`` run on IPv4 alone (``test_dut_reacts_on_ipv4``), in
both directions: the MPA negotiation matrix (hil/peer/builtin_mpa.py), whose test is in
the MPA frames, the same in either family, and the DDP/RDMAP errors, a TERMINATE from the
peer and several FPDUs in one segment (hil/peer/builtin_errors.py), which happen above an
established stream, where the family plays no part; so ci/suites stays cheap.  The
others run on every family the pair has.

A run that holds its provider's expectation where that expectation departs from
the RFCs (peerexpect's ``finding``) is a known finding: xfail, its reason the
finding (docs/peer-expectations.md lists them).  The peer's record and verdict are
attached to the report.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from hil.cm import sequences
from hil.cm.session import CMSession
from hil.inventory.hostmodel import Family
from hil.peer import builtin, builtin_errors
from hil.peer.builtin import SCENARIOS
from hil.peer.judge import record_text
from hil.peer.run import run_scenario
from hil.plugin.api import Contract, explain
from hil.report.attach import attach_peer_run
from hil.run import PairRun
from hil.run.testrun import TestRun

IPV4_ONLY = builtin.IPV4_ONLY | builtin_errors.ONE_FAMILY


@pytest.fixture
def react(
    cm: CMSession,
    contract: Contract,
    hil_run: PairRun,
    family: Family,
    hil_test: TestRun | None,
) -> Callable[[str], None]:
    """Run a scenario by name on the test's pair, direction and family, and judge it."""
    return lambda name: _react(name, cm, contract, hil_run, family, hil_test)


@pytest.mark.parametrize("name", [n for n in SCENARIOS.names() if n not in IPV4_ONLY])
def test_dut_reacts_as_its_provider_says(name: str, react: Callable[[str], None]) -> None:
    """The scenario's DUT reaction is its provider's; the DUT accepts a connection after."""
    react(name)


@pytest.mark.parametrize("family", ["ipv4"])
@pytest.mark.parametrize("name", [n for n in SCENARIOS.names() if n in IPV4_ONLY])
def test_dut_reacts_on_ipv4(name: str, react: Callable[[str], None]) -> None:
    """The same for a scenario whose family does not matter, on IPv4 alone."""
    react(name)


def _react(
    name: str,
    cm: CMSession,
    contract: Contract,
    hil_run: PairRun,
    family: Family,
    hil_test: TestRun | None,
) -> None:
    dut = cm.active  # "a-b": A is the DUT, B the peer
    run = run_scenario(cm, dut, SCENARIOS[name])
    attach_peer_run(run)
    if hil_test is not None:
        # The DUT's recording faced the peer, no CM endpoint: the contract's rules speak
        # of two (a DISCONNECTED must follow an action of the test's); the peer verdict
        # judges it instead, so the test takes it as judged.
        hil_test.contract(run.timeline)
    # The DUT passive: the connect comes from the peer's host.
    after = hil_run.session(f"{cm.other(dut)}-{dut}", evidence=False, family=family)
    contract(after.run(sequences.connect, private_data=b"hil-after-peer"))
    verdict = run.verdict
    peer = f"{verdict.to_text()}\npeer record:\n{record_text(run.result.record)}"
    assert verdict.ok, explain(run.timeline, peer)
    if verdict.known_finding:
        pytest.xfail(f"known finding of {verdict.provider}: {verdict.known_finding}")
