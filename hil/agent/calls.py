"""Typed agent calls: params as a method's ``TypedDict``, the reply decoded against its declaration.

:func:`request` calls a :class:`~hil.agent.protocol.Method` of any
:class:`Caller` (an :class:`~hil.agent.client.AgentClient`, or a stand-in in
tests), :func:`cm_request` a CM endpoint's operation through ``cm_call``.  A
reply that is not what the protocol declares is an AgentError naming the
host: the agent and the controller disagree on the protocol.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, TypeVar

from hil.agent.protocol import CM_CALL, CMCallParams, CMOp, Method, ProtocolMismatch, decode
from hil.errors import AgentError
from hil.timeouts import active

P = TypeVar("P", bound=Mapping[str, Any])
R = TypeVar("R")


class Caller(Protocol):
    """What a typed request needs of an agent: its host's name and its raw call
    (an :class:`AgentClient`, or a stand-in in tests)."""

    @property
    def host(self) -> str: ...

    def call(self, method: str, timeout: float = ..., **params: Any) -> Any: ...


def decode_reply(agent: Caller, what: str, declared: type[R], raw: object) -> R:
    """``raw`` (``what``: "links reply") as its ``declared`` type; an AgentError
    naming the host when it does not match."""
    try:
        return decode(declared, raw, what)
    except ProtocolMismatch as e:
        raise AgentError(
            agent.host,
            f"agent answer not as the protocol declares it: {e}; the agent and this "
            "controller disagree on hil.agent.protocol (a bug in hil)",
        ) from None


def call_bound(timeout: float | None) -> float:
    """``timeout``, or the agent call layer's bound in force when it is None."""
    return active().agent_call_s if timeout is None else timeout


def request(agent: Caller, method: Method[P, R], params: P, timeout: float | None = None) -> R:
    """Call ``method`` with ``params`` (its TypedDict), bounded by ``timeout`` (default:
    the agent call layer's, :mod:`hil.timeouts`); its reply, decoded."""
    raw = agent.call(method.name, call_bound(timeout), **params)
    return decode_reply(agent, f"{method.name} reply", method.reply, raw)


def cm_request(
    agent: Caller, endpoint: int, op: CMOp[P, R], params: P, timeout: float | None = None
) -> R:
    """Run ``op`` with ``params`` in CM endpoint ``endpoint`` (``cm_call``); its reply."""
    call = CMCallParams(endpoint=endpoint, op=op.name, params=dict(params))
    raw = request(agent, CM_CALL, call, timeout)
    return decode_reply(agent, f"cm_call {op.name} reply", op.reply, raw)
