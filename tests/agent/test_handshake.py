"""The agent's handshake, read without an agent: a good one, and one short of a field."""

from __future__ import annotations

from typing import Any

import pytest

from hil.agent.handshake import Hello, read_hello
from hil.agent.protocol import PROTOCOL_VERSION
from hil.errors import AgentError


def hello(**changes: Any) -> dict[str, Any]:
    msg = {
        "agent": "hil",
        "protocol": PROTOCOL_VERSION,
        "hash": "ab" * 32,
        "pid": 7,
        "python": "3.11.2",
        "kernel": "6.1.0",
        "uid": 0,
        "methods": ["ping", "links"],
    }
    return {**msg, **changes}


def test_a_good_handshake_is_what_the_agent_announced() -> None:
    got = read_hello("h1", hello(), expect_hash="ab" * 32)
    assert got == Hello(PROTOCOL_VERSION, "ab" * 32, 7, "3.11.2", "6.1.0", 0, ("ping", "links"))
    assert read_hello("h1", hello(hash="cd"), expect_hash=None).hash == "cd"  # nothing pinned


def test_a_handshake_short_of_a_field_names_the_host_and_the_field() -> None:
    msg = hello()
    del msg["kernel"]
    with pytest.raises(AgentError, match=r"h1: agent handshake: .*kernel"):
        read_hello("h1", msg, expect_hash=None)
