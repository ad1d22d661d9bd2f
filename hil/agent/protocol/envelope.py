"""The envelope: the agent's first line, a request, and the two shapes of an answer."""

from __future__ import annotations

from typing import Any, Literal, TypedDict

from .names import ErrorKind

__all__ = [
    "Handshake", "Request", "ErrorBody", "ResultReply", "ErrorReply", "PROTOCOL_VERSION",
    "AGENT_GRACE",
]  # fmt: skip


# Bump on any change that an older client or agent would misread: a method
# whose params or reply change meaning, a key that changes type.  A new
# method (announced in the handshake's ``methods``) does not.
PROTOCOL_VERSION = 1
# The agent answers a call that overran its timeout this much after it (the
# client waits longer still, hil/agent/client.py).
AGENT_GRACE = 0.5


class Handshake(TypedDict):
    """agent -> client, the first line."""

    agent: Literal["hil"]
    protocol: int
    hash: str  # sha256 of the zipapp the agent runs from
    pid: int
    python: str
    kernel: str
    uid: int
    methods: list[str]


class Request(TypedDict):
    """client -> agent: one call."""

    id: int
    method: str
    params: dict[str, Any]
    timeout: float


class ErrorBody(TypedDict):
    """What failed: ``type`` for programs, ``message`` for people, ``details`` JSON."""

    type: ErrorKind
    message: str
    details: dict[str, Any]


class ResultReply(TypedDict):
    """agent -> client: the call's result (its method's reply)."""

    id: int
    result: Any


class ErrorReply(TypedDict):
    """agent -> client: the call failed (``id`` is None for a line that was no request)."""

    id: int | None
    error: ErrorBody
