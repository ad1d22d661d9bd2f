"""The CM endpoints of a host (cm/methods.py on the agent): opening one (a worker process),
calling its operations (``cm_call``; their params and replies are in
``cmops.py``), killing and closing it; and the host's clock."""

from __future__ import annotations

from typing import Any, TypedDict

from .host import NoParams
from .names import CMOpName
from .spec import Method

__all__ = [
    "CMCallParams", "EndpointParams", "ClockReply", "ClockPairReply", "EndpointReply",
    "KillReply", "CloseReply", "CM_NOW", "CLOCK_PAIR", "CM_OPEN", "CM_CALL", "CM_KILL",
    "CM_CLOSE", "CM_ENDPOINTS",
]  # fmt: skip


class _CMCallRequired(TypedDict):
    endpoint: int
    op: CMOpName


class CMCallParams(_CMCallRequired, total=False):
    params: dict[str, Any] | None  # the op's params (CM_OPS[op].params)


class EndpointParams(TypedDict):
    endpoint: int


class ClockReply(TypedDict):
    t_us: int  # the host's CLOCK_MONOTONIC, µs


class ClockPairReply(TypedDict):
    """The host's CLOCK_REALTIME read between two reads of its CLOCK_MONOTONIC (µs)."""

    mono_us: int  # the two monotonic reads' midpoint
    wall_us: int  # CLOCK_REALTIME, since the epoch
    spread_us: int  # half the two monotonic reads' difference: wall_us is mono_us +/- this


class EndpointReply(TypedDict):
    endpoint: int
    pid: int


class KillReply(TypedDict):
    t_us: int  # when SIGKILL was sent (host clock)
    pid: int


class CloseReply(TypedDict):
    status: int | None  # the worker's exit status; None when it was killed
    killed: bool


CM_NOW = Method("cm_now", NoParams, ClockReply)
CLOCK_PAIR = Method("clock_pair", NoParams, ClockPairReply)
CM_OPEN = Method("cm_open", NoParams, EndpointReply)
CM_CALL = Method("cm_call", CMCallParams, dict[str, Any])  # the op's reply: CM_OPS[op]
CM_KILL = Method("cm_kill", EndpointParams, KillReply)
CM_CLOSE = Method("cm_close", EndpointParams, CloseReply)
CM_ENDPOINTS = Method("cm_endpoints", NoParams, list[EndpointReply])
