"""The peer's agent methods (hil/agent/remote/peer/op.py) through the real agent, and
the controller's ``run_peer`` (hil/agent/peerrun.py) driving the DUT's steps between
the segments; every reply decoded strictly against hil.agent.protocol."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from agenttest import StrictAgent

from hil.agent import AgentCallError
from hil.agent.peerrun import run_peer
from hil.agent.remote.errors import OpError
from hil.agent.remote.peer import op
from hil.agent.remote.peer.endpoint import Endpoint
from hil.agent.remote.peer.scenario import Interpreter

HELLO = b"hello".hex()


def test_a_passive_peer_stops_at_the_dut_connect_and_resumes_after_it(
    host_agent: StrictAgent,
) -> None:
    steps: list[dict[str, Any]] = [
        {"step": "dut", "action": "connect"},
        {"step": "expect", "frame": "mpa_request", "fields": {"rev": 2, "ird": 3}},
        {"step": "send", "frame": "mpa_reply"},
        {"step": "expect", "frame": "fpdu", "fields": {"opcode": "send", "payload": HELLO}},
    ]
    duts: list[Interpreter] = []

    def connect(index: int, step: dict[str, Any]) -> None:
        assert (index, step["action"]) == (0, "connect")
        (port,) = listening
        dut = Interpreter(
            Endpoint("active", "127.0.0.1", port),
            [
                {"step": "send", "frame": "mpa_request", "ird": 3},
                {"step": "expect", "frame": "mpa_reply", "fields": {"ord": 3}},
                {"step": "send", "frame": "fpdu", "opcode": "send", "payload": HELLO},
            ],
        )
        duts.append(dut)
        threading.Thread(target=dut.run, args=(time.monotonic() + 10,), daemon=True).start()

    # The listener's port is known once peer_run stopped at the dut step: wrap the call.
    listening: list[int] = []
    real_call = host_agent.call

    def call(method: str, timeout: float | None = None, **params: Any) -> Any:
        got = real_call(method, timeout, **params)
        if method == "peer_run":
            listening.append(int(got["local"].rsplit(":", 1)[1]))
        return got

    host_agent.call = call  # type: ignore[method-assign]
    result = run_peer(host_agent, "passive", "127.0.0.1", 0, steps, 10, on_dut=connect)
    assert result.error is None and result.unmet is None
    assert [(e["dir"], e["frame"]) for e in result.record] == [
        ("rx", "mpa_request"),
        ("tx", "mpa_reply"),
        ("rx", "fpdu"),
    ]
    assert result.remote.startswith("127.0.0.1:")
    assert {"peer_run", "peer_resume"} <= host_agent.checked
    duts[0].endpoint.close()


def test_an_unmet_expectation_and_the_drain_come_back_whole(host_agent: StrictAgent) -> None:
    server = Endpoint("passive", "127.0.0.1", 0)
    port = int(server.local.rsplit(":", 1)[1])

    def dut() -> None:
        server.open(time.monotonic() + 5)
        server.read(time.monotonic() + 5)
        server.close()  # a FIN where the peer wanted a reply

    threading.Thread(target=dut, daemon=True).start()
    steps: list[dict[str, Any]] = [
        {"step": "send", "frame": "mpa_request"},
        {"step": "expect", "frame": "mpa_reply", "within": 3},
    ]
    result = run_peer(host_agent, "active", "127.0.0.1", port, steps, 10, drain_s=0.5)
    assert result.unmet is not None
    assert (result.unmet["step"], result.unmet["why"]) == (1, "fin came, not mpa_reply")
    assert [e["frame"] for e in result.record] == ["mpa_request", "fin"]


def test_bad_params_and_unknown_sessions_are_clear_errors(host_agent: StrictAgent) -> None:
    with pytest.raises(AgentCallError, match="neither 'active' nor 'passive'") as bad:
        host_agent.call("peer_run", 5, role="sideways", address="127.0.0.1", port=1, steps=[])
    assert bad.value.kind == "bad_params"
    with pytest.raises(AgentCallError, match="step 0") as bad:
        host_agent.call(
            "peer_run", 5, role="active", address="127.0.0.1", port=1, steps=[{"step": "fly"}]
        )
    for bad_step in ({"step": "sleep", "seconds": "long"}, {"step": "expect", "fields": [1]}):
        with pytest.raises(AgentCallError, match="step 0: (seconds|fields)"):
            host_agent.call(
                "peer_run", 5, role="active", address="127.0.0.1", port=1, steps=[bad_step]
            )
    with pytest.raises(AgentCallError, match="no peer session 999") as bad:
        host_agent.call("peer_resume", 5, session=999)
    assert bad.value.kind == "not_found"
    with pytest.raises(ValueError, match="needs on_dut"):
        run_peer(host_agent, "active", "127.0.0.1", 1, [{"step": "dut"}], 5)


def test_peer_close_ends_a_session_stopped_at_a_dut_step() -> None:
    got = op.peer_run("passive", "127.0.0.1", 0, [{"step": "dut"}, {"step": "sleep"}], 5)
    assert got["stopped_at"] == 0 and got["local"].startswith("127.0.0.1:")
    closed = op.peer_close(got["session"])
    assert closed["record"] == [] and closed["local"] == got["local"]
    with pytest.raises(OpError, match="no peer session"):
        op.peer_resume(got["session"], 5)


def test_the_steps_after_a_dut_step_can_be_renewed_with_what_the_dut_shared(
    host_agent: StrictAgent,
) -> None:
    server = Endpoint("passive", "127.0.0.1", 0)
    port = int(server.local.rsplit(":", 1)[1])
    got: list[Any] = []

    def dut() -> None:
        server.open(time.monotonic() + 5)
        while (entry := server.read(time.monotonic() + 3)) is not None:
            got.append(entry)
        server.close()

    reader = threading.Thread(target=dut, daemon=True)
    reader.start()
    # An unresolved value would not encode: the renewed steps must be the ones sent.
    write = {"step": "send", "frame": "fpdu", "opcode": "write", "stag": {"dut": "stag"}}
    steps: list[dict[str, Any]] = [
        {"step": "send", "frame": "mpa_request"},
        {"step": "dut", "action": "reg_mr"},
        write,
        {"step": "send", "frame": "fin"},
    ]
    renewed = [*steps[:2], {**write, "stag": 0x1200}, steps[3]]
    result = run_peer(host_agent, "active", "127.0.0.1", port, steps, 10, on_dut=lambda *_: renewed)
    assert result.error is None
    reader.join(10)
    assert [e["fields"].get("stag") for e in got if e["frame"] == "fpdu"] == [0x1200]
    assert steps == renewed  # the caller's list follows, for the next dut step
    session = op.peer_run("passive", "127.0.0.1", 0, [{"step": "dut"}, {"step": "sleep"}], 5)
    with pytest.raises(OpError, match="steps: 1 anew, the scenario has 2"):
        op.peer_resume(session["session"], 5, steps=[{"step": "sleep"}])
    op.peer_close(session["session"])
