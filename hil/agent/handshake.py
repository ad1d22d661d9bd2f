"""The agent's handshake: what it announces, checked before any call.

Its first line names the agent, its protocol version and build hash, its
pid, python, kernel, uid and methods.  Another protocol version or another
build than the one pushed is refused with what to do.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hil.agent.protocol import PROTOCOL_VERSION, Handshake, ProtocolMismatch, decode
from hil.errors import AgentError


@dataclass(frozen=True)
class Hello:
    """What the agent announced in its handshake."""

    protocol: int
    hash: str
    pid: int
    python: str
    kernel: str
    uid: int
    methods: tuple[str, ...]


def read_hello(host: str, msg: dict[str, Any], expect_hash: str | None) -> Hello:
    """The handshake ``msg`` of ``host``'s agent; AgentError when it is not hil's agent of
    this protocol version, or not the build ``expect_hash`` names."""
    if msg.get("agent") != "hil" or msg.get("protocol") != PROTOCOL_VERSION:
        raise AgentError(
            host,
            f"agent speaks protocol {msg.get('protocol')!r}, this controller "
            f"speaks {PROTOCOL_VERSION}: the host runs another hil version's agent",
        )
    if expect_hash is not None and msg.get("hash") != expect_hash:
        raise AgentError(
            host,
            f"agent reports build {str(msg.get('hash'))[:12]}, expected "
            f"{expect_hash[:12]}: the file on the host is not the one built; delete "
            f"{expect_hash}.pyz from its agent cache (~/.cache/hil/agent) and retry",
        )
    try:
        hello = decode(Handshake, msg, "handshake")
    except ProtocolMismatch as e:
        raise AgentError(host, f"agent handshake: {e}") from None
    return Hello(
        protocol=hello["protocol"],
        hash=hello["hash"],
        pid=hello["pid"],
        python=hello["python"],
        kernel=hello["kernel"],
        uid=hello["uid"],
        methods=tuple(hello["methods"]),
    )
