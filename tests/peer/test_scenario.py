"""hil.peer.scenario: the typed model, YAML files, the checks' messages, the agent's step list."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from hil.errors import InputError
from hil.peer.builtin import SCENARIOS
from hil.peer.scenario import (
    Dut,
    DutRef,
    Expect,
    Scenario,
    Send,
    Sleep,
    load,
    parse,
    resolve,
    save,
    to_agent,
)


def _scenario(*steps: dict[str, Any]) -> dict[str, Any]:
    return {"name": "s", "role": "active", "expectation": "ok", "steps": list(steps)}


def _error(tmp_path: Path, text: str) -> str:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(InputError) as e:
        load(path)
    return str(e.value)


def test_a_file_loads_into_typed_steps(tmp_path: Path) -> None:
    path = tmp_path / "crc.yaml"
    path.write_text(
        "role: active\nexpectation: mpa.bad_crc\nsteps:\n"
        "  - {step: dut, action: listen, args: {backlog: 4}}\n"
        "  - {step: send, frame: mpa_request, rev: 2, key: 4D50, segments: [1, 1], gap: 0.5}\n"
        "  - {step: expect, frame: mpa_reply, within: 5, fields: {rev: 2}}\n"
        "  - {step: send, frame: fpdu, opcode: send, crc: bad, coalesce_with_next: true}\n"
        "  - {step: sleep, seconds: 0.5}\n"
    )
    s = load(path)
    assert s.name == "crc" and s.role == "active" and s.expectation == "mpa.bad_crc"
    assert s.steps == (
        Dut("listen", (("backlog", 4),)),
        Send("mpa_request", (("rev", 2), ("key", "4d50")), segments=(1, 1), gap=0.5),
        Expect("mpa_reply", 5.0, (("rev", 2),)),
        Send("fpdu", (("opcode", "send"), ("crc", "bad")), coalesce_with_next=True),
        Sleep(0.5),
    )


@pytest.mark.parametrize("scenario", list(SCENARIOS), ids=SCENARIOS.names())
def test_every_built_in_round_trips_through_a_file(tmp_path: Path, scenario: Scenario) -> None:
    path = tmp_path / "replay.yaml"
    save(scenario, path)
    assert load(path) == scenario


def test_the_agent_gets_the_shared_step_format() -> None:
    s = parse(
        _scenario(
            {"step": "dut", "action": "listen"},
            {"step": "send", "frame": "mpa_request", "rev": 2, "truncate": 10},
            {"step": "expect", "frame": "close", "within": 65},
            {"step": "sleep", "seconds": 1},
        ),
        "here",
    )
    assert to_agent(s) == [
        {"step": "dut", "action": "listen"},
        {"step": "send", "frame": "mpa_request", "rev": 2, "truncate": 10},
        {"step": "expect", "frame": "close", "within": 65.0},
        {"step": "sleep", "seconds": 1.0},
    ]


@pytest.mark.parametrize(
    ("step", "message"),
    [
        (
            "{step: send, frame: mpa_request, kye: 00}",
            "step 1: field 'kye': unknown for a mpa_request send (did you mean 'key'?)",
        ),
        (
            "{step: send, frame: mpa_request, rev: 256}",
            "step 1: field 'rev': 256 is out of range 0..255",
        ),
        (
            "{step: send, frame: mpa_request, m: true}",
            "step 1: field 'm': expected an integer 0..1, got True",
        ),
        ("{step: send, frame: mpa_request, key: 12345}", "field 'key': expected a hex string"),
        (
            "{step: send, frame: mpa_request, rtr: rdma}",
            "field 'rtr': 'rdma' is not one of: none, send",
        ),
        ("{step: send, frame: fpdu, payload: '00'}", "field 'opcode': a fpdu send must name it"),
        (
            "{step: send, frame: fpdu, opcode: flush}",
            "field 'opcode': 'flush' is not one of: write",
        ),
        ("{step: send, frame: fpdu, opcode: 16}", "field 'opcode': 16 is out of range 0..15"),
        ("{step: send, frame: fpdu, opcode: send, crc: ok}", "'ok' is not good, bad, none"),
        ("{step: send, frame: fin, rev: 2}", "field 'rev': unknown for a fin send"),
        ("{step: send, frame: mpa_request, segments: [0]}", "field 'segments': expected a list"),
        ("{step: send, frame: mpa_request, gap: 1}", "field 'gap': a gap lies between 'segments'"),
        (
            "{step: send, frame: mpa_request, segments: [8], gap: -1}",
            "field 'gap': expected seconds",
        ),
        ("{step: expect, frame: fpdu, fields: {opcod: send}, within: 1}", "field 'opcod': unknown"),
        ("{step: expect, frame: close}", "step 1: field 'within': expected seconds >= 0, got None"),
        ("{step: dut, action: dance}", "step 1: action: expected one of listen"),
        ("{step: wait}", "step 1: step: expected one of send, expect, dut, sleep, got 'wait'"),
    ],
)
def test_a_bad_step_names_the_file_the_step_and_the_field(
    tmp_path: Path, step: str, message: str
) -> None:
    error = _error(tmp_path, f"role: active\nexpectation: ok\nsteps: [{step}]\n")
    assert error.startswith(f"{tmp_path / 'bad.yaml'}: ") and message in error


def test_the_step_number_counts_from_one(tmp_path: Path) -> None:
    error = _error(
        tmp_path,
        "role: active\nexpectation: ok\nsteps:\n  - {step: dut, action: listen}\n"
        "  - {step: send, frame: fpdu, opcode: write, stag: -1}\n",
    )
    assert "step 2: field 'stag': -1 is out of range 0..4294967295" in error


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "a scenario is a mapping"),
        ("role: [", "not a YAML scenario"),
        (
            "role: both\nexpectation: ok\nsteps: [{step: sleep, seconds: 1}]",
            "role: expected one of",
        ),
        ("role: active\nexpectation: ok\nsteps: []", "steps: expected a non-empty list"),
        ("role: active\nsteps: [{step: sleep, seconds: 1}]", "expectation: expected a non-empty"),
        (
            "role: active\nexpectation: ok\nstep: []",
            "field 'step': unknown (did you mean 'steps'?)",
        ),
    ],
)
def test_a_bad_file_is_a_clear_error(tmp_path: Path, text: str, message: str) -> None:
    assert message in _error(tmp_path, text)


def test_a_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="cannot read the scenario"):
        load(tmp_path / "none.yaml")


_REG_MR = "  - {step: dut, action: reg_mr, args: {access: remote_read}}\n"


def test_a_field_names_the_dut_region_and_is_resolved_at_run_time(tmp_path: Path) -> None:
    path = tmp_path / "tagged.yaml"
    path.write_text(
        "role: active\nexpectation: base_bounds\nsteps:\n"
        + _REG_MR
        + "  - {step: send, frame: fpdu, opcode: write, stag: {dut: stag}, to: {dut: base+len-2}}\n"
    )
    s = load(path)
    assert dict(s.steps[1].fields)["to"] == DutRef("base+len-2")  # type: ignore[union-attr]
    save(s, path)
    assert load(path) == s
    steps = to_agent(s)
    assert steps[1]["stag"] == {"dut": "stag"}
    resolved = resolve(steps, {"stag": 0x1200, "base": 0x1000, "len": 4096})
    assert (resolved[1]["stag"], resolved[1]["to"]) == (0x1200, 0x1000 + 4096 - 2)
    assert resolved[0] == steps[0]


@pytest.mark.parametrize(
    ("field", "message"),
    [
        ("stag: {dut: rkey}", "field 'stag': {dut: rkey}: 'rkey' is not a value the DUT shares"),
        ("stag: {dut: stag+}", "field 'stag': {dut: stag+}: cannot read 'stag+' from '+' on"),
        ("stag: {dut: ''}", "an empty reference"),
        ("stag: {dut: stag base}", "cannot read 'stag base'"),
        ("stag: {dut: 1, x: 2}", "field 'stag': expected a value or {dut: EXPR}"),
        ("payload: {dut: base}", "only a number field can name the DUT's region"),
    ],
)
def test_a_bad_reference_is_a_clear_error(tmp_path: Path, field: str, message: str) -> None:
    text = "role: active\nexpectation: x\nsteps:\n" + _REG_MR
    text += f"  - {{step: send, frame: fpdu, opcode: write, {field}}}\n"
    assert message in _error(tmp_path, text)


def test_a_reference_needs_a_reg_mr_before_it(tmp_path: Path) -> None:
    text = "role: active\nexpectation: x\nsteps:\n"
    text += "  - {step: send, frame: fpdu, opcode: write, stag: {dut: stag}}\n" + _REG_MR
    assert "step 1: field 'stag': names a value of the DUT's region, but no reg_mr" in _error(
        tmp_path, text
    )
    text = "role: active\nexpectation: x\nsteps:\n" + _REG_MR
    text += "  - {step: expect, frame: fpdu, fields: {stag: {dut: stag}}, within: 1}\n"
    assert "only a send step's fields may be {dut: EXPR}" in _error(tmp_path, text)
