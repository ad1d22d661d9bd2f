"""hil.peer.builtin_regressions: the known-bug scenarios, registered with the built-ins."""

from __future__ import annotations

from hil.agent.protocol import rdmap
from hil.peer.builtin import SCENARIOS
from hil.peer.builtin_regressions import UNKNOWN_OPCODE
from hil.peer.scenario import Dut, Expect, Send


def test_the_cve_2026_23242_scenario_sends_an_unknown_opcode_as_the_first_fpdu() -> None:
    steps = SCENARIOS["first-fpdu-unknown-opcode"].steps
    fpdus = [(i, s) for i, s in enumerate(steps) if isinstance(s, Send) and s.frame == "fpdu"]
    accept = next(i for i, s in enumerate(steps) if isinstance(s, Dut) and s.action == "accept")
    assert len(fpdus) == 1 and fpdus[0][0] > accept
    assert dict(fpdus[0][1].fields)["opcode"] == UNKNOWN_OPCODE
    assert isinstance(steps[-1], Expect) and steps[-1].frame == "close"


def test_the_unknown_opcode_goes_on_the_wire_as_given() -> None:
    # RDMAP control byte (RFC 5040 4.2): RV 01 in bits 7-6, the opcode in bits 3-0,
    # after the 2-byte DDP control (RFC 5041 4.3).
    ulpdu = rdmap.encode({"opcode": UNKNOWN_OPCODE, "payload": "68696c"}, msn=1)
    assert ulpdu[1] == 0x40 | UNKNOWN_OPCODE
    decoded = rdmap.decode(ulpdu)
    assert decoded["opcode"] == UNKNOWN_OPCODE and "error" in decoded
