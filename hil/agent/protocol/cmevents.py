"""A CM endpoint's log: the events its channel delivered, what it did by itself,
and its read errors; the ``events`` op that fetches them."""

from __future__ import annotations

from typing import Any, Literal, TypedDict, Union

from .cmops import QPInfo
from .names import AutoAnswer, CMEventType
from .spec import CMOp

__all__ = [
    "EventsParams", "CMEvent", "CMEventEntry", "CMActionEntry", "CMErrorEntry", "EventsReply",
    "CMLogEntry", "OP_EVENTS",
]  # fmt: skip


class EventsParams(TypedDict, total=False):
    after: int  # the last log seq already fetched
    wait: float  # seconds to wait for a matching event
    types: list[CMEventType] | None
    id: int | None


class CMEvent(TypedDict):
    """An event the endpoint's channel delivered, stamped when it was read."""

    type: CMEventType
    status: int
    id: int | None  # the cm_id's handle (a CONNECT_REQUEST's is new; a destroyed id's former)
    listen_id: int | None  # its listener's handle (likewise)
    private_data: str  # hex
    host_t_us: int  # the host's CLOCK_MONOTONIC, µs
    local: str  # the id's own address, "ip:port" ("[v6]:port"); "" while unknown
    remote: str  # its peer's, likewise
    # param.conn's IRD/ORD words as the event reports them (rdma_get_cm_event(3)); how
    # each maps to this side's IRD and ORD is the provider's (docs/ird-ord.md)
    responder_resources: int
    initiator_depth: int


class CMEventEntry(CMEvent):
    kind: Literal["event"]
    seq: int


class _CMActionRequired(TypedDict):
    kind: Literal["action"]
    seq: int
    name: AutoAnswer
    id: int
    params: dict[str, Any]
    result: str  # "ok" or the errno's name
    t_us: int
    us: int


class CMActionEntry(_CMActionRequired, total=False):
    """What the endpoint did by itself: a listener's automatic accept or reject."""

    qp: QPInfo


class CMErrorEntry(TypedDict):
    """Reading the channel failed."""

    kind: Literal["error"]
    seq: int
    message: str
    t_us: int


# A Union, not ``|``: this alias is evaluated when the module loads (python 3.9).
CMLogEntry = Union[CMEventEntry, CMActionEntry, CMErrorEntry]  # noqa: UP007


class EventsReply(TypedDict):
    log: list[CMLogEntry]
    t_us: int


OP_EVENTS = CMOp("events", EventsParams, EventsReply)
