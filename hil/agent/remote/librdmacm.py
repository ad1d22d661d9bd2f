"""A thin ctypes layer over librdmacm and libibverbs, for the remote agent.

Runs on a lab host under the host's own ``/usr/bin/python3``: standard
library only, and nothing imported from the rest of ``hil``; its QP side is
the sibling module ``ibverbs.py``; both live in the agent package
(``hil/agent/remote/``) and are bundled into its zipapp.

Why ctypes and not pyverbs: pyverbs' ``CMEvent`` exposes neither the event's
status nor the cm_id it belongs to, its event channel has no pollable fd, a
``get_cm_event`` blocks while holding the GIL, and an un-acked ``CMEvent``
deadlocks ``close()``.  The contract checks need status, id, listen_id,
private data and a timestamp for every event, and the agent must never block
without bound.  So here the channel's fd is non-blocking and polled with a
timeout, ``struct rdma_cm_event`` is read field by field, and every event is
acked right after it is copied (an un-acked event hangs ``rdma_destroy_id``).

cm_ids are named by small integer handles, never raw pointers, so they can
cross the agent's JSON channel.  On iWARP a connect or an accept needs a QP:
call :meth:`CMChannel.create_qp` on the id first (after ADDR_RESOLVED on the
active side, after CONNECT_REQUEST on the passive side).

Blocking: every call returns promptly except ``rdma_destroy_id`` on an id in
CONN_SENT (bounded by the provider's connect timeout: 10 s on siw,
``ep_timeout_secs`` on cxgb4) and siw's ``rdma_connect`` (a kernel TCP
connect).  ctypes releases the GIL in foreign calls, so the agent can run
those in a worker thread and keep answering.

Struct layouts are those of rdma-core's headers on x86_64
(``rdma/rdma_cma.h``, ``infiniband/verbs.h``; rdma-core 44).
"""

from __future__ import annotations

import ctypes
import errno
import os
import select
import socket
import struct
import threading
import time
from collections import OrderedDict
from ctypes import POINTER, Structure, byref, c_int, c_uint8, c_uint32, c_void_p
from typing import TYPE_CHECKING, NamedTuple

from .ibverbs import (
    QP_NUM_OFFSET,
    QPResources,
    RdmaError,
    RdmaUnavailable,
    SharedPD,
    Signatures,
    call,
    load,
)
from .ibverbs import SIGNATURES as VERBS_SIGNATURES
from .protocol import CM_EVENT_TYPES, CMEvent, CMEventType, QPInfo

if TYPE_CHECKING:  # typing.Self is 3.11; the agent runs on any python3 >= 3.9
    from typing import Self

__all__ = [
    "EVENT_NAMES",
    "CMChannel",
    "Lib",
    "RdmaError",
    "RdmaUnavailable",
    "RawEvent",
    "cook",
    "probe",
    "sockaddr_text",
]

# enum rdma_cm_event_type: the name of event number i is EVENT_NAMES[i].
EVENT_NAMES = CM_EVENT_TYPES
RDMA_PS_TCP = 0x0106
MAX_PRIVATE_DATA = 255  # rdma_conn_param.private_data_len is a uint8_t
RETIRED_KEPT = 4096  # destroyed ids remembered per channel (their pointers, for late events)
# errnos that mean "no RDMA here" rather than "this call went wrong".
_UNAVAILABLE = (errno.ENODEV, errno.ENOENT, errno.ENOSYS, errno.ENXIO)


class _ConnParam(Structure):
    _fields_ = [
        ("private_data", c_void_p),
        ("private_data_len", c_uint8),
        ("responder_resources", c_uint8),
        ("initiator_depth", c_uint8),
        ("flow_control", c_uint8),
        ("retry_count", c_uint8),
        ("rnr_retry_count", c_uint8),
        ("srq", c_uint8),
        ("qp_num", c_uint32),
    ]


class _CMEvent(Structure):
    # param is a union of conn and ud; only conn is read (iWARP has no UD).
    _fields_ = [
        ("id", c_void_p),
        ("listen_id", c_void_p),
        ("event", c_int),
        ("status", c_int),
        ("conn", _ConnParam),
        ("_ud_rest", c_uint8 * 32),
    ]


SOCKADDR_STORAGE = 128  # sizeof(struct sockaddr_storage)


class _CMIdHead(Structure):
    """The first fields of struct rdma_cm_id, to its route's addresses (the rest is never read).

    ``src``/``dst`` are ``route.addr``'s ``src_storage``/``dst_storage``:
    librdmacm refreshes them from the kernel on ADDR_RESOLVED, ROUTE_RESOLVED
    and, for the new id, CONNECT_REQUEST.
    """

    _fields_ = [
        ("verbs", c_void_p),
        ("channel", c_void_p),
        ("context", c_void_p),
        ("qp", c_void_p),
        ("src", c_uint8 * SOCKADDR_STORAGE),
        ("dst", c_uint8 * SOCKADDR_STORAGE),
    ]


SOCKADDR_IN6 = 28  # sizeof(struct sockaddr_in6): the longest address an event's id holds
_ROUTE_SRC = _CMIdHead.src.offset
_ROUTE_DST = _CMIdHead.dst.offset


class RawEvent(NamedTuple):
    """One CM event as :meth:`CMChannel.read_event` copied it (acked already): its ids as
    handles, its route's two sockaddrs as bytes ("" when the id was not live)."""

    type: CMEventType
    status: int
    id: int | None
    listen_id: int | None
    private_data: bytes
    host_t_us: int
    src: bytes
    dst: bytes


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
    }


_SIGNATURES: Signatures = {
    "rdma_create_event_channel": (c_void_p, []),
    "rdma_destroy_event_channel": (None, [c_void_p]),
    "rdma_create_id": (c_int, [c_void_p, POINTER(c_void_p), c_void_p, c_int]),
    "rdma_destroy_id": (c_int, [c_void_p]),
    "rdma_bind_addr": (c_int, [c_void_p, c_void_p]),
    "rdma_resolve_addr": (c_int, [c_void_p, c_void_p, c_void_p, c_int]),
    "rdma_resolve_route": (c_int, [c_void_p, c_int]),
    "rdma_listen": (c_int, [c_void_p, c_int]),
    "rdma_connect": (c_int, [c_void_p, POINTER(_ConnParam)]),
    "rdma_accept": (c_int, [c_void_p, POINTER(_ConnParam)]),
    "rdma_reject": (c_int, [c_void_p, c_void_p, c_uint8]),
    "rdma_disconnect": (c_int, [c_void_p]),
    "rdma_create_qp": (c_int, [c_void_p, c_void_p, c_void_p]),
    "rdma_destroy_qp": (None, [c_void_p]),
    "rdma_get_cm_event": (c_int, [c_void_p, POINTER(POINTER(_CMEvent))]),
    "rdma_ack_cm_event": (c_int, [POINTER(_CMEvent)]),
}


class Lib:
    """librdmacm.so.1 (``cm``) and libibverbs.so.1 (``verbs``), their functions typed."""

    def __init__(self, cm: str = "librdmacm.so.1", verbs: str = "libibverbs.so.1") -> None:
        self.cm = load(cm, _SIGNATURES, "librdmacm1")
        self.verbs = load(verbs, VERBS_SIGNATURES, "libibverbs1")


def sockaddr(address: str, port: int = 0) -> ctypes.Array[ctypes.c_char]:
    """A struct sockaddr_in or sockaddr_in6 for a numeric address."""
    try:
        packed = socket.inet_pton(socket.AF_INET, address)
        raw = struct.pack("=H", socket.AF_INET) + struct.pack("!H", port) + packed + bytes(8)
    except OSError:
        try:
            packed = socket.inet_pton(socket.AF_INET6, address)
        except OSError:
            raise RdmaError(
                "sockaddr", errno.EINVAL, f"not a numeric IP address: {address!r}"
            ) from None
        raw = (
            struct.pack("=H", socket.AF_INET6)
            + struct.pack("!HI", port, 0)
            + packed
            + struct.pack("=I", 0)
        )
    return ctypes.create_string_buffer(raw, len(raw))


def sockaddr_text(raw: bytes) -> str:
    """A struct sockaddr as ``ip:port`` (``[v6]:port``); "" for any other family (unspecified)."""
    family = int.from_bytes(raw[:2], "little")  # sa_family_t is host order (x86_64)
    port = int.from_bytes(raw[2:4], "big")
    if family == socket.AF_INET:
        return f"{socket.inet_ntop(socket.AF_INET, raw[4:8])}:{port}"
    if family == socket.AF_INET6:
        return f"[{socket.inet_ntop(socket.AF_INET6, raw[8:24])}]:{port}"
    return ""


class _Id:
    """A cm_id and the verbs resources this layer made for its QP."""

    def __init__(self, ptr: int) -> None:
        self.ptr = ptr
        self.res: QPResources | None = None

    def head(self) -> _CMIdHead:
        return _CMIdHead.from_address(self.ptr)


class CMChannel:
    """An RDMA CM event channel and the cm_ids on it, named by integer handles.

    Not thread-safe, except that a blocking :meth:`destroy_id` may run in
    another thread while this one polls events.
    """

    def __init__(self, lib: Lib | None = None) -> None:
        self._lib = lib or Lib()
        ptr = self._lib.cm.rdma_create_event_channel()
        if not ptr:
            err = ctypes.get_errno()
            if err in _UNAVAILABLE:
                raise RdmaUnavailable(
                    "rdma_create_event_channel",
                    err,
                    "no RDMA device, or the kernel lacks RDMA CM (rdma_ucm)",
                )
            raise RdmaError("rdma_create_event_channel", err)
        self._ch: int | None = ptr
        self.fd: int = c_int.from_address(ptr).value  # struct rdma_event_channel { int fd; }
        os.set_blocking(self.fd, False)
        self._poller = select.poll()
        self._poller.register(self.fd, select.POLLIN)
        self._ids: dict[int, _Id] = {}
        self._by_ptr: dict[int, int] = {}
        # Destroyed ids' pointers -> their former handles, so an event the kernel
        # delivers for an id after its destroy still names it (no-event-after-destroy
        # judges it) instead of arriving with no id; dropped when malloc hands the
        # pointer to a new id, and bounded (oldest first) for a long-lived worker.
        self._retired: OrderedDict[int, int] = OrderedDict()
        self._next = 1
        self._lock = threading.Lock()
        self._shared: dict[int, SharedPD] = {}  # per device context: create_bare_qp's PD and CQ

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _register(self, ptr: int) -> int:
        with self._lock:
            handle = self._next
            self._next += 1
            self._ids[handle] = _Id(ptr)
            self._by_ptr[ptr] = handle
            self._retired.pop(ptr, None)
        return handle

    def _id(self, handle: int) -> _Id:
        try:
            return self._ids[handle]
        except KeyError:
            raise RdmaError("cm_id", errno.EBADF, f"no cm_id with handle {handle}") from None

    def _res(self, handle: int, op: str) -> QPResources:
        res = self._id(handle).res
        if res is None:
            raise RdmaError(op, errno.EINVAL, f"cm_id {handle} has no QP: call create_qp first")
        return res

    def create_id(self) -> int:
        """A new RDMA_PS_TCP cm_id on this channel; returns its handle."""
        out = c_void_p()
        call("rdma_create_id", self._lib.cm.rdma_create_id, self._ch, byref(out), None, RDMA_PS_TCP)
        return self._register(int(out.value or 0))

    def bind(self, handle: int, address: str, port: int = 0) -> None:
        """Bind a cm_id to a local address (and port, for a listener)."""
        call(
            "rdma_bind_addr",
            self._lib.cm.rdma_bind_addr,
            self._id(handle).ptr,
            sockaddr(address, port),
        )

    def listen(self, handle: int, backlog: int) -> None:
        """Listen on a bound cm_id.  ``backlog`` must be > 0 (0 means 1024 in ucma)."""
        if backlog <= 0:
            raise RdmaError("rdma_listen", errno.EINVAL, "pass a positive backlog")
        call("rdma_listen", self._lib.cm.rdma_listen, self._id(handle).ptr, backlog)

    def resolve_addr(
        self, handle: int, dst: str, port: int, src: str | None = None, timeout_ms: int = 2000
    ) -> None:
        """Start address resolution; ADDR_RESOLVED or ADDR_ERROR follows."""
        src_sa = sockaddr(src) if src else None
        call(
            "rdma_resolve_addr",
            self._lib.cm.rdma_resolve_addr,
            self._id(handle).ptr,
            src_sa,
            sockaddr(dst, port),
            timeout_ms,
        )

    def resolve_route(self, handle: int, timeout_ms: int = 2000) -> None:
        """Start route resolution; ROUTE_RESOLVED or ROUTE_ERROR follows."""
        call(
            "rdma_resolve_route", self._lib.cm.rdma_resolve_route, self._id(handle).ptr, timeout_ms
        )

    def create_qp(self, handle: int, depth: int = 16, buf_size: int = 65536) -> QPInfo:
        """Give a cm_id a PD, a CQ, an RC QP and a registered buffer.

        Returns ``qp_num`` and the buffer's ``addr``, ``rkey`` and ``length``
        (what a peer needs for RDMA WRITEs into it).
        """
        cm = self._id(handle)
        verbs = cm.head().verbs
        if not verbs:
            raise RdmaError(
                "rdma_create_qp",
                errno.EINVAL,
                f"cm_id {handle} has no device yet: resolve its address first",
            )
        if cm.res is not None:
            raise RdmaError("rdma_create_qp", errno.EEXIST, f"cm_id {handle} has a QP already")
        res = QPResources(self._lib.verbs, verbs, depth, buf_size)
        try:
            call(
                "rdma_create_qp",
                self._lib.cm.rdma_create_qp,
                cm.ptr,
                res.pd,
                byref(res.init_attr()),
            )
        except RdmaError:
            res.release()
            raise
        cm.res = res
        return res.attach(int(cm.head().qp or 0))

    def shared_pd(self, handle: int) -> SharedPD:
        """The one PD and CQ of the device ``handle``'s id is on (made at the first call):
        what :meth:`create_bare_qp` uses; a listener may have it made before requests come,
        as librdmacm makes its own PD when an id first gets its device."""
        verbs = self._id(handle).head().verbs
        if not verbs:
            raise RdmaError(
                "ibv_alloc_pd", errno.EINVAL, f"cm_id {handle} has no device yet: bind it first"
            )
        shared = self._shared.get(verbs)
        if shared is None:
            shared = self._shared[verbs] = SharedPD(self._lib.verbs, verbs)
        return shared

    def create_bare_qp(self, handle: int) -> int:
        """An RC QP on this channel's one PD and CQ per device, with no buffer or receives.

        For connections that carry no traffic (a storm's; rdma-core's cmtime
        shares one PD and CQ too): the QP is the only per-connection verbs
        object.  Returns its qp_num.  Posting on it is refused (no buffer).
        """
        cm = self._id(handle)
        head = cm.head()
        if not head.verbs:
            raise RdmaError(
                "rdma_create_qp",
                errno.EINVAL,
                f"cm_id {handle} has no device yet: resolve its address first",
            )
        if head.qp:
            raise RdmaError("rdma_create_qp", errno.EEXIST, f"cm_id {handle} has a QP already")
        shared = self.shared_pd(handle)
        call("rdma_create_qp", self._lib.cm.rdma_create_qp, cm.ptr, shared.pd, byref(shared.attr))
        return int(c_uint32.from_address(int(cm.head().qp or 0) + QP_NUM_OFFSET).value)

    def _conn_param(self, private_data: bytes, depth: int) -> _ConnParam:
        if len(private_data) > MAX_PRIVATE_DATA:
            raise RdmaError(
                "conn_param", errno.EINVAL, f"private data longer than {MAX_PRIVATE_DATA} bytes"
            )
        buf = ctypes.create_string_buffer(private_data, len(private_data) or 1)
        param = _ConnParam(
            private_data=ctypes.addressof(buf) if private_data else None,
            private_data_len=len(private_data),
            responder_resources=depth,
            initiator_depth=depth,
            retry_count=7,
            rnr_retry_count=7,
        )
        param._keep = buf  # the buffer must live as long as param
        return param

    def connect(self, handle: int, private_data: bytes = b"", depth: int = 1) -> None:
        """rdma_connect with private data; needs a QP (:meth:`create_qp`)."""
        param = self._conn_param(private_data, depth)
        call("rdma_connect", self._lib.cm.rdma_connect, self._id(handle).ptr, byref(param))

    def accept(self, handle: int, private_data: bytes = b"", depth: int = 1) -> None:
        """rdma_accept a CONNECT_REQUEST's id with private data; needs a QP."""
        param = self._conn_param(private_data, depth)
        call("rdma_accept", self._lib.cm.rdma_accept, self._id(handle).ptr, byref(param))

    def reject(self, handle: int, private_data: bytes = b"") -> None:
        """rdma_reject a CONNECT_REQUEST's id with private data."""
        if len(private_data) > MAX_PRIVATE_DATA:
            raise RdmaError(
                "rdma_reject", errno.EINVAL, f"private data longer than {MAX_PRIVATE_DATA} bytes"
            )
        call(
            "rdma_reject",
            self._lib.cm.rdma_reject,
            self._id(handle).ptr,
            private_data or None,
            len(private_data),
        )

    def disconnect(self, handle: int) -> None:
        """rdma_disconnect (on iWARP it moves the QP to SQD, not ERR)."""
        call("rdma_disconnect", self._lib.cm.rdma_disconnect, self._id(handle).ptr)

    def qp_to_error(self, handle: int) -> None:
        """Move the cm_id's QP to ERR: an abortive close."""
        self._res(handle, "ibv_modify_qp").to_error()

    def post_recv(self, handle: int, count: int = 1) -> None:
        """Post ``count`` receives on the cm_id's QP, each of its whole buffer."""
        self._res(handle, "ibv_post_recv").post_recv(count)

    def post_send(self, handle: int, length: int, remote: tuple[int, int] | None = None) -> int:
        """Post one signaled SEND, or RDMA WRITE to ``remote`` = (addr, rkey); returns wr_id."""
        return self._res(handle, "ibv_post_send").post_send(length, remote)

    def poll_cq(self, handle: int, max_entries: int = 16) -> list[dict[str, int]]:
        """Completions ready on the cm_id's CQ (never waits)."""
        return self._res(handle, "ibv_poll_cq").poll(max_entries)

    def poll_event(self, timeout_s: float) -> CMEvent | None:
        """The next CM event, or None if none came within ``timeout_s``.

        The event is copied and acked at once; ``host_t_us`` is this host's
        CLOCK_MONOTONIC in µs when it was read.  A CONNECT_REQUEST's ``id``
        is a new handle; ``listen_id`` is its listener's.  An event for an id
        destroyed on this channel names it by the handle it had (a kernel
        that delivers one after ``rdma_destroy_id`` returned breaks the
        contract's rule 5, which needs to see whose it was); ``id`` is None
        only for a pointer this channel never knew.  ``local`` and ``remote``
        are a live id's addresses as librdmacm holds them then (``ip:port``,
        "" while unknown, or for a destroyed id, whose memory is freed).
        """
        raw = self.read_event(timeout_s)
        return None if raw is None else cook(raw)

    def read_event(self, timeout_s: float) -> RawEvent | None:
        """:meth:`poll_event`'s read without its dict: what a storm takes inside a timed
        step (an accept can follow the request at once), :func:`cook`ed afterwards."""
        if self._ch is None:
            raise RdmaError("rdma_get_cm_event", errno.EBADF, "the channel is closed")
        if not self._poller.poll(max(0, int(timeout_s * 1000))):
            return None
        ev = POINTER(_CMEvent)()
        if self._lib.cm.rdma_get_cm_event(self._ch, byref(ev)) != 0:
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
            # Name the ids before the ack: until then rdma_destroy_id of this
            # id blocks, so a destroy racing this event cannot unmap it first.
            if kind == "CONNECT_REQUEST" and id_ptr not in self._by_ptr:
                self._register(id_ptr)
            handle = self._known(id_ptr)
            listen_handle = self._known(listen_ptr) if listen_ptr else None
            # The id's 4-tuple, copied while the event pins the id; only from a live id:
            # a destroyed one's memory is freed.
            if id_ptr in self._by_ptr:
                src = ctypes.string_at(id_ptr + _ROUTE_SRC, SOCKADDR_IN6)
                dst = ctypes.string_at(id_ptr + _ROUTE_DST, SOCKADDR_IN6)
            else:
                src = dst = b""
        finally:
            self._lib.cm.rdma_ack_cm_event(ev)
        if kind is None:  # a newer librdmacm's event: no CM operation here asks for one
            raise RdmaError(
                "rdma_get_cm_event",
                errno.EPROTO,
                f"event number {number} (status {status}) is not a protocol "
                "CMEventType; acked and dropped",
            )
        return RawEvent(kind, status, handle, listen_handle, pdata, host_t_us, src, dst)

    def destroy_id(self, handle: int) -> int:
        """Destroy a cm_id (its QP first, its CQ, MR and PD after); returns µs it blocked.

        The time covers the QP's destroy too: on siw, in CONN_SENT, it is
        destroying the QP that blocks until the MPA timeout (seen on the lab).
        """
        cm = self._id(handle)
        start = time.monotonic_ns()
        if cm.head().qp:
            self._lib.cm.rdma_destroy_qp(cm.ptr)
        call("rdma_destroy_id", self._lib.cm.rdma_destroy_id, cm.ptr)
        took_us = (time.monotonic_ns() - start) // 1000
        self._retire(handle, cm)
        if cm.res is not None:
            cm.res.release()
        return took_us

    def destroy_id_first(self, handle: int) -> int:
        """rdma_destroy_id while the id's QP still exists, then the QP (ibv_destroy_qp: the
        freed id can no longer name it) and its CQ, MR and PD; returns when the id's
        destroy returned (CLOCK_MONOTONIC, µs).

        librdmacm's rdma_destroy_id leaves an id's QP alone (its man page asks
        for the QP to go first); the kernel must cope: in CONN_SENT iw_cm's
        destroy waits for the connect's reply while the QP lives on.
        """
        cm = self._id(handle)
        qp = cm.head().qp
        call("rdma_destroy_id", self._lib.cm.rdma_destroy_id, cm.ptr)
        returned_us = time.monotonic_ns() // 1000
        self._retire(handle, cm)
        if qp:
            call("ibv_destroy_qp", self._lib.verbs.ibv_destroy_qp, qp)
        if cm.res is not None:
            cm.res.release()
        return returned_us

    def _retire(self, handle: int, cm: _Id) -> None:
        """Forget a destroyed id, keeping its handle for events that name its pointer."""
        with self._lock:
            del self._ids[handle]
            self._by_ptr.pop(cm.ptr, None)
            self._retired[cm.ptr] = handle
            while len(self._retired) > RETIRED_KEPT:
                self._retired.popitem(last=False)

    def destroy_qp(self, handle: int) -> None:
        """rdma_destroy_qp: the id's QP (and the verbs resources made for it) go, the id stays.

        On iWARP this ends the connection at once (siw moves the QP to ERR):
        after an rdma_disconnect it is how rdma-core's cmtime closes.
        """
        cm = self._id(handle)
        if cm.head().qp:
            self._lib.cm.rdma_destroy_qp(cm.ptr)
        if cm.res is not None:
            cm.res.release()
            cm.res = None

    def _known(self, ptr: int) -> int | None:
        """The handle of a live id, else the one a destroyed id had, else None."""
        with self._lock:
            return self._by_ptr.get(ptr, self._retired.get(ptr))

    def handles(self) -> list[int]:
        """The handles of the cm_ids alive on this channel."""
        return sorted(self._ids)

    def close(self) -> None:
        """Destroy every cm_id (newest first) and the channel; raises the first failure."""
        first: RdmaError | None = None
        for handle in sorted(self._ids, reverse=True):
            try:
                self.destroy_id(handle)
            except RdmaError as exc:
                first = first or exc
        for shared in self._shared.values():  # after every QP on them
            shared.release()
        self._shared.clear()
        if self._ch:
            self._lib.cm.rdma_destroy_event_channel(self._ch)
            self._ch = None
        if first:
            raise first


def probe(lib: Lib | None = None) -> str | None:
    """None when this host can open an RDMA CM channel, else the reason, one line."""
    try:
        CMChannel(lib).close()
    except RdmaError as exc:
        return str(exc)
    return None
