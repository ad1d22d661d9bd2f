"""hil.peer.builtin_mpa: the MPA negotiation matrix's scenarios, run peer against peer over
127.0.0.1 with the other peer answering as siw 6.1's expectation says, and judged."""

from __future__ import annotations

from typing import Any

import pytest

from hil.judge.peerexpect import RFC, Scenario
from hil.judge.peerproviders import IW_CXGB4, SIW, expect
from hil.peer.builtin import IPV4_ONLY, SCENARIOS
from hil.peer.judge import Observed, judge
from hil.peer.scenario import to_agent
from tests.agent.remote.peer.test_peer_endpoint import both

MATRIX = sorted(n for n in SCENARIOS.names() if n.startswith("neg-"))
# Where siw answers as the RFC asks and the connection stands: the other peer can play it.
STANDS = [n for n in MATRIX if expect("siw", SCENARIOS[n].expectation).close == "none"]
MPA_FIELDS = ("rev", "c", "m", "r", "ird", "ord", "p2p", "rtr")


def test_the_matrix_is_built_in_on_ipv4_alone_one_scenario_a_cell() -> None:
    assert set(MATRIX) == IPV4_ONLY
    classes = {SCENARIOS[n].expectation for n in MATRIX}
    negotiation = set(list(Scenario)[: list(Scenario).index(Scenario.WRONG_KEY)])
    assert classes == {s.value for s in negotiation} - {"mpa_rev2"}  # v2-connect-send's
    for name in MATRIX:
        assert SCENARIOS[name].role == ("passive" if name.startswith("neg-dut-") else "active")


@pytest.mark.parametrize("provider", [SIW, IW_CXGB4])
def test_every_dut_mpa_field_is_one_the_codec_decodes(provider: Any) -> None:
    for entry in provider.values():
        assert set(entry.dut_mpa) <= set(MPA_FIELDS), entry


def _peer_steps(name: str) -> list[dict[str, Any]]:
    return [s for s in to_agent(SCENARIOS[name]) if s["step"] != "dut"]


def _as_siw(name: str) -> list[dict[str, Any]]:
    """The other peer's steps: siw's MPA frame (its table's dut_mpa), then each FPDU the
    scenario sends, expected with its opcode and bytes."""
    scenario = SCENARIOS[name]
    mine = _peer_steps(name)
    frame = "mpa_reply" if scenario.role == "active" else "mpa_request"
    dut_mpa = dict(expect("siw", scenario.expectation).dut_mpa)
    steps: list[dict[str, Any]] = []
    if scenario.role == "active":
        steps.append({"step": "expect", "frame": "mpa_request", "within": 5})
    steps.append({"step": "send", "frame": frame, **dut_mpa})
    if scenario.role == "passive":
        reply = next(s for s in mine if s.get("frame") == "mpa_reply")
        fields = {k: v for k, v in reply.items() if k in MPA_FIELDS}
        steps.append({"step": "expect", "frame": "mpa_reply", "fields": fields, "within": 5})
    for s in mine:
        if s["step"] == "send" and s["frame"] == "fpdu":
            fields = {
                "opcode": s["opcode"],
                **({"payload": s["payload"]} if "payload" in s else {}),
            }
            steps.append({"step": "expect", "frame": "fpdu", "fields": fields, "within": 5})
    return steps


@pytest.mark.parametrize("name", STANDS)
def test_a_scenario_against_a_peer_answering_as_siw_holds_siws_expectation(name: str) -> None:
    scenario = SCENARIOS[name]
    mine, dut = _peer_steps(name), _as_siw(name)
    active, passive = (mine, dut) if scenario.role == "active" else (dut, mine)
    runs = both(active, passive)
    record = runs[0 if scenario.role == "active" else 1].endpoint.record
    exp = expect("siw", scenario.expectation)
    verdict = judge(name, scenario.expectation, "siw", Observed(tuple(record), exp.cm_events))
    assert verdict.ok, verdict.to_text()


def _reply(**fields: Any) -> dict[str, Any]:
    return {"t_ns": 2, "dir": "rx", "frame": "mpa_reply", "fields": fields}


REQUEST = {"t_ns": 1, "dir": "tx", "frame": "mpa_request", "fields": {"ird": 0x3FFF}}
ESTABLISHED = ("connect_request", "established")


def test_a_reply_with_ird_and_ord_swapped_fails_citing_siw_accept() -> None:
    # What bench/mutants/ird-ord-swapped.patch makes siw_accept send.
    swapped = _reply(rev=2, r=0, ird=1, ord=128)
    verdict = judge(
        "neg-ird-ord-3fff", "ird_ord_3fff", "siw", Observed((REQUEST, swapped), ESTABLISHED)
    )
    [failure] = verdict.failures
    assert (
        "expected the DUT's mpa_reply with r=0 ird=128 ord=1, it had ird=1 ord=128" in failure.what
    )
    assert any("siw_accept (Linux 6.1.192)" in s for s in failure.sources)
    assert "RFC 6581 3" in failure.sources


def test_no_mpa_frame_from_the_dut_fails_the_check() -> None:
    verdict = judge("neg-rev1", "mpa_rev1", "siw", Observed((REQUEST,), ESTABLISHED))
    assert "the peer got none" in verdict.failures[0].what


def test_siw_refusing_a_reply_ord_above_its_maximum_is_a_known_finding_of_the_nibble_swap() -> None:
    record = (
        {
            "t_ns": 1,
            "dir": "rx",
            "frame": "mpa_request",
            "fields": dict(SIW[Scenario.IRD_ORD_REPLY_3FFF].dut_mpa),
        },
        {"t_ns": 2, "dir": "tx", "frame": "mpa_reply", "fields": {"ird": 0x3FFF, "ord": 0x3FFF}},
        {
            "t_ns": 3,
            "dir": "rx",
            "frame": "fpdu",
            "fields": {"opcode": "terminate", "layer": 0, "etype": 2, "ecode": 6},
        },
        {"t_ns": 4, "dir": "rx", "frame": "fin"},
    )
    verdict = judge(
        "neg-dut-ird-ord-3fff", "ird_ord_reply_3fff", "siw", Observed(record, ("connect_error",))
    )
    assert verdict.ok, verdict.to_text()
    assert "Layer and EType" in verdict.known_finding
    assert RFC[Scenario.IRD_ORD_REPLY_3FFF].terminate_optional
