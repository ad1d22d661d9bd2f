"""Storms: N connections driven by a worker itself (``cm_call`` op ``storm``;
cm/storm.py on the agent)."""

from __future__ import annotations

from typing import Any, Literal, TypedDict

from .cmevents import CMLogEntry
from .spec import CMOp

__all__ = [
    "StormParams", "StormConn", "StormActionEntry", "StormReply", "StormRole", "OP_STORM",
]  # fmt: skip


StormRole = Literal["connect", "serve"]


class _StormRequired(TypedDict):
    role: StormRole
    count: int  # connect: connections to make; serve: connections to serve


class StormParams(_StormRequired, total=False):
    """A storm's role and its knobs (cm/storm.py's docstring says what each role does)."""

    dst: str  # connect: the listener's address and port, and our source address
    port: int
    src: str
    parallel: int  # connect: threads issuing rdma_connect (siw's blocks for a TCP handshake)
    traffic: int  # SENDs per connection once established (connect), receives posted (serve)
    tag: str  # connect: private data = tag + the connection's index (4 digits)
    listen_id: int  # serve: the listener whose requests it answers
    hold_s: float  # serve: leave the channel unread this long first (requests queue)
    idle_s: float  # serve: stop once nothing is open and no event came this long
    start_us: int  # host CLOCK_MONOTONIC: when the storm begins (0: at once)
    wait_s: float  # one step's bound, all connections together
    deadline_s: float  # the whole storm's bound
    after: int  # the log seq the caller already has: the reply's log starts after it


class _StormConnRequired(TypedDict):
    index: int
    tag: str  # its private data (text): ties the two sides' ids of one connection
    result: str  # "ok", an errno's name, the failing event's type, or why a step gave up


class StormConn(_StormConnRequired, total=False):
    """One connection: its id and each step's ``[t_us, us]`` (host clock): when the
    call began and how long until the step ended (the call's return or its event)."""

    id: int
    steps: dict[str, list[int]]


class StormActionEntry(TypedDict):
    """A CM call the storm made (connect, accept, disconnect, destroy), for the timeline."""

    name: str
    id: int
    t_us: int
    us: int
    result: str  # "ok" or the errno's name
    params: dict[str, Any]


class StormReply(TypedDict):
    t_us: int  # when the storm began (host clock)
    end_us: int
    conns: list[StormConn]
    actions: list[StormActionEntry]
    log: list[CMLogEntry]  # the worker's log after ``after``: every event, stamped


OP_STORM = CMOp("storm", StormParams, StormReply)
