"""Declaring a request and its reply: a :class:`Method` of the agent or a
:class:`CMOp` of a CM endpoint.  Declaring one registers it in ``METHODS`` or
``CM_OPS``; each topic module declares its own beside their params and replies."""

from __future__ import annotations

import typing
from collections.abc import Mapping
from typing import Any, Generic, TypeVar

from .checks import check
from .names import CMOpName, MethodName

__all__ = [
    "Spec", "Method", "CMOp", "METHODS", "CM_OPS",
]  # fmt: skip


P = TypeVar("P", bound=Mapping[str, Any])
R = TypeVar("R")


class Spec(Generic[P, R]):
    """A request/reply pair: the params ``TypedDict`` and the reply type."""

    name: str

    def __init__(self, params: type[P], reply: type[R]) -> None:
        self.params = params
        self.reply = reply

    def decode(self, value: object, strict: bool = False) -> R:
        """``value`` as this reply, once checked; ``strict`` also refuses undeclared keys."""
        check(self.reply, value, f"{self.name} reply", strict)
        return typing.cast(R, value)

    def check_params(self, params: Mapping[str, object]) -> None:
        """Refuse params this request does not declare (names and types)."""
        check(self.params, dict(params), f"{self.name} params", strict=True)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


class Method(Spec[P, R]):
    """An agent method: ``{"method": name, "params": P}`` answered by ``R``."""

    def __init__(self, name: MethodName, params: type[P], reply: type[R]) -> None:
        super().__init__(params, reply)
        self.name: MethodName = name
        METHODS[name] = self


class CMOp(Spec[P, R]):
    """A CM endpoint operation, run by ``cm_call`` (``op`` = name, ``params`` = P)."""

    def __init__(self, name: CMOpName, params: type[P], reply: type[R]) -> None:
        super().__init__(params, reply)
        self.name: CMOpName = name
        CM_OPS[name] = self


# Every declared method and CM operation by its name (tests/agent/test_protocol_spec.py
# checks them against what the agent serves).
METHODS: dict[MethodName, Method[Any, Any]] = {}
CM_OPS: dict[CMOpName, CMOp[Any, Any]] = {}
