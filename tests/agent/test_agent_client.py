"""The client's side of the protocol, against stand-in agents that misbehave.

The real agent's side of the same contract is in test_agent_protocol.py, the
declarations against the functions that serve them in test_protocol_spec.py.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from hil.agent import protocol
from hil.agent.client import AgentClient, request
from hil.agent.transport import LocalChannel
from hil.errors import AgentError, CommandTimeout
from hil.timeouts import configured

FAKE = str(Path(__file__).with_name("fake_agent.py"))


def fake(mode: str, **kwargs: Any) -> AgentClient:
    return AgentClient(LocalChannel([sys.executable, FAKE, mode]), "fakehost", **kwargs)


def test_version_mismatch_is_refused_with_a_clear_error() -> None:
    with pytest.raises(
        AgentError, match=r"fakehost: agent speaks protocol 999, this controller speaks 1"
    ):
        fake("mismatch")


def test_wrong_build_hash_is_refused() -> None:
    with pytest.raises(AgentError, match="reports build fake, expected 0123456789ab"):
        fake("mute", expect_hash="0123456789abcdef")


def test_missing_handshake_times_out() -> None:
    with pytest.raises(AgentError, match=r"fakehost: agent sent no handshake within 0.5s"):
        fake("nohello", handshake_timeout=0.5)


def test_interpreter_that_exits_at_once_says_so() -> None:
    channel = LocalChannel([sys.executable, "-c", "import sys; sys.exit('no python here')"])
    with pytest.raises(
        AgentError, match=r"(?s)no agent handshake: agent exited \(status 1\).*no python here"
    ):
        AgentClient(channel, "fakehost")


def test_call_that_gets_no_answer_times_out_naming_host_method_and_timeout() -> None:
    client = fake("mute")
    try:
        with pytest.raises(
            CommandTimeout,
            match=r"fakehost: timeout \(agent call layer, 0.1 s\) waiting for fakehost's "
            r"agent to answer links \(no answer at all",
        ):
            client.call("links", timeout=0.1)
        assert client.alive  # one lost call does not end the session
    finally:
        client.close()


def test_agent_death_mid_call_fails_the_call_with_its_stderr_tail() -> None:
    client = fake("die")
    try:
        with pytest.raises(
            AgentError, match=r"(?s)agent links: agent exited \(status 3\).*fake agent crashed"
        ):
            client.call("links", timeout=10)
        assert not client.alive
        with pytest.raises(AgentError, match="agent ping: agent exited"):
            client.call("ping")
    finally:
        client.close()


def test_lines_that_are_not_protocol_are_skipped(caplog: pytest.LogCaptureFixture) -> None:
    client = fake("noisy")
    try:
        assert client.call("ping", timeout=5) == "ok"
    finally:
        client.close()
    assert "non-protocol line: b'a library talking" in caplog.text


def test_a_reply_the_protocol_does_not_declare_is_an_agent_error_naming_the_host() -> None:
    client = fake("noisy")  # answers "ok" to everything
    try:
        with pytest.raises(
            AgentError,
            match=r"fakehost: agent answer not as the protocol declares it: "
            r"ping reply: expected PingReply, got 'ok'",
        ):
            request(client, protocol.PING, protocol.NoParams())
    finally:
        client.close()


def test_a_call_without_a_bound_takes_the_agent_call_layers_configured_one() -> None:
    client = fake("mute")
    try:
        with configured(agent_call_s=0.2), pytest.raises(CommandTimeout) as e:
            request(client, protocol.RDMA_LINKS, protocol.NoParams())
        assert str(e.value).startswith(
            "fakehost: timeout (agent call layer, 0.2 s) waiting for fakehost's agent "
            "to answer rdma_links"
        )
    finally:
        client.close()
