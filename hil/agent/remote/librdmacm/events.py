"""Reading a channel's CM events: copied field by field, their ids named, acked at once.

An un-acked event hangs ``rdma_destroy_id``, so every event is acked right
after it is copied; its ids are named by the channel's handles before the ack
(until then a destroy of the id blocks, so it cannot unmap the id first).
"""

from __future__ import annotations

import ctypes
import errno
import select
import time
from ctypes import POINTER, byref
from typing import NamedTuple

from ...protocol import CMEvent, CMEventType
from .cdll import RdmaError
from .cmabi import EVENT_NAMES, ROUTE_DST, ROUTE_SRC, SOCKADDR_IN6, CMEventStruct, sockaddr_text
from .ids import IdTable


class RawEvent(NamedTuple):
    """One CM event as :func:`read_event` copied it (acked already): its ids as
    handles, its route's two sockaddrs as bytes ("" when the id was not live), and
    ``param.conn``'s responder_resources and initiator_depth as the event reports them."""

    type: CMEventType
    status: int
    id: int | None
    listen_id: int | None
    private_data: bytes
    host_t_us: int
    src: bytes
    dst: bytes
    responder_resources: int = 0
    initiator_depth: int = 0


def cook(raw: RawEvent) -> CMEvent:
    """The protocol's event of a :class:`RawEvent` (hex private data, ``ip:port`` text)."""
    return {
        "type": raw.type,
        "status": raw.status,
        "id": raw.id,
        "listen_id": raw.listen_id,
        "private_data": raw.private_data.hex(),
        "host_t_us": raw.host_t_us,
        "local": sockaddr_text(raw.src) if raw.src else "",
        "remote": sockaddr_text(raw.dst) if raw.dst else "",
        "responder_resources": raw.responder_resources,
        "initiator_depth": raw.initiator_depth,
    }


def read_event(
    cm: ctypes.CDLL, channel: int, poller: select.poll, ids: IdTable, timeout_s: float
) -> RawEvent | None:
    """The next event on ``channel`` (``poller`` watches its fd), or None if none came
    within ``timeout_s``; a CONNECT_REQUEST's new id is registered in ``ids``."""
    if not poller.poll(max(0, int(timeout_s * 1000))):
        return None
    ev = POINTER(CMEventStruct)()
    if cm.rdma_get_cm_event(channel, byref(ev)) != 0:
        err = ctypes.get_errno()
        if err == errno.EAGAIN:
            return None  # woken, but the event was not complete yet
        raise RdmaError("rdma_get_cm_event", err)
    host_t_us = time.monotonic_ns() // 1000
    try:
        e = ev.contents
        number = int(e.event)
        kind = EVENT_NAMES[number] if 0 <= number < len(EVENT_NAMES) else None
        pdata = (
            ctypes.string_at(e.conn.private_data, e.conn.private_data_len)
            if e.conn.private_data and e.conn.private_data_len
            else b""
        )
        id_ptr, listen_ptr, status = int(e.id or 0), int(e.listen_id or 0), e.status
        depths = int(e.conn.responder_resources), int(e.conn.initiator_depth)
        # Name the ids before the ack: until then rdma_destroy_id of this
        # id blocks, so a destroy racing this event cannot unmap it first.
        if kind == "CONNECT_REQUEST" and not ids.live(id_ptr):
            ids.register(id_ptr)
        handle = ids.known(id_ptr)
        listen_handle = ids.known(listen_ptr) if listen_ptr else None
        # The id's 4-tuple, copied while the event pins the id; only from a live id:
        # a destroyed one's memory is freed.
        if ids.live(id_ptr):
            src = ctypes.string_at(id_ptr + ROUTE_SRC, SOCKADDR_IN6)
            dst = ctypes.string_at(id_ptr + ROUTE_DST, SOCKADDR_IN6)
        else:
            src = dst = b""
    finally:
        cm.rdma_ack_cm_event(ev)
    if kind is None:  # a newer librdmacm's event: no CM operation here asks for one
        raise RdmaError(
            "rdma_get_cm_event",
            errno.EPROTO,
            f"event number {number} (status {status}) is not a protocol "
            "CMEventType; acked and dropped",
        )
    return RawEvent(kind, status, handle, listen_handle, pdata, host_t_us, src, dst, *depths)
