"""The RDMA CM event channel and the operations on its cm_ids.

The channel's fd is non-blocking and polled with a timeout (the agent must
never block without bound); its events are read by :mod:`.events`, its ids
named by :mod:`.ids`, their QPs made by :mod:`.qps`.
"""

from __future__ import annotations

import ctypes
import errno
import os
import select
import time
from ctypes import byref, c_int, c_void_p
from typing import TYPE_CHECKING

from ...protocol import CMEvent, QPInfo, RegionAccess
from .cdll import RdmaError, RdmaUnavailable, call
from .cmabi import MAX_PRIVATE_DATA, RDMA_PS_TCP, Lib, conn_param, sockaddr, sockaddr_text
from .events import RawEvent, cook, read_event
from .ibverbs import QPResources, SharedPD
from .ids import CMId, IdTable
from .qps import DeviceQPs

if TYPE_CHECKING:  # typing.Self is 3.11; the agent runs on any python3 >= 3.9
    from typing import Self

# errnos that mean "no RDMA here" rather than "this call went wrong".
_UNAVAILABLE = (errno.ENODEV, errno.ENOENT, errno.ENOSYS, errno.ENXIO)


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
        self._ids = IdTable()
        self._qps = DeviceQPs(self._lib)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _id(self, handle: int) -> CMId:
        return self._ids.get(handle)

    def _res(self, handle: int, op: str) -> QPResources:
        res = self._id(handle).res
        if res is None:
            raise RdmaError(op, errno.EINVAL, f"cm_id {handle} has no QP: call create_qp first")
        return res

    def addresses(self, handle: int) -> tuple[str, str]:
        """The id's own and its peer's address now, ``ip:port`` ("" while unknown): what
        rdma_get_local_addr and rdma_get_peer_addr return (inline in rdma_cma.h: the id's
        route.addr; rdma_get_local_addr(3)), read apart from any event."""
        head = self._id(handle).head()
        return sockaddr_text(bytes(head.src)), sockaddr_text(bytes(head.dst))

    def create_id(self) -> int:
        """A new RDMA_PS_TCP cm_id on this channel; returns its handle."""
        out = c_void_p()
        call("rdma_create_id", self._lib.cm.rdma_create_id, self._ch, byref(out), None, RDMA_PS_TCP)
        return self._ids.register(int(out.value or 0))

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
        """Give a cm_id a PD, a CQ, an RC QP and a registered buffer (:meth:`DeviceQPs.create`):
        its ``qp_num`` and the buffer's ``addr``, ``rkey`` and ``length``."""
        return self._qps.create(self._id(handle), handle, depth, buf_size)

    def shared_pd(self, handle: int) -> SharedPD:
        """The one PD and CQ of the device ``handle``'s id is on (:meth:`DeviceQPs.shared_pd`)."""
        return self._qps.shared_pd(self._id(handle), handle)

    def create_bare_qp(self, handle: int) -> int:
        """An RC QP on this channel's one PD and CQ per device, with no buffer or receives
        (:meth:`DeviceQPs.create_bare`); returns its qp_num."""
        return self._qps.create_bare(self._id(handle), handle)

    def connect(self, handle: int, private_data: bytes = b"", ird: int = 1, ord: int = 1) -> None:
        """rdma_connect with private data, asking for ``ird`` and ``ord``; needs a QP
        (:meth:`create_qp`)."""
        param = conn_param(private_data, ird, ord)
        call("rdma_connect", self._lib.cm.rdma_connect, self._id(handle).ptr, byref(param))

    def accept(self, handle: int, private_data: bytes = b"", ird: int = 1, ord: int = 1) -> None:
        """rdma_accept a CONNECT_REQUEST's id with private data, ``ird`` and ``ord``;
        needs a QP."""
        param = conn_param(private_data, ird, ord)
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

    def resources(self, handle: int) -> QPResources:
        """The cm_id's QP, CQ and registered buffer, for work that posts and reads them
        itself (the payload check)."""
        return self._res(handle, "ibv_post_send")

    def reg_mr(self, handle: int, length: int, access: list[RegionAccess]) -> tuple[int, int]:
        """Register a region of ``length`` bytes with ``access`` on the cm_id's QP's PD
        (:meth:`QPResources.register`): its rkey and address."""
        return self._res(handle, "ibv_reg_mr").register(length, access)

    def rd_atomic(self, handle: int) -> tuple[int, int]:
        """The cm_id's QP's ``max_rd_atomic`` and ``max_dest_rd_atomic`` (ibv_query_qp)."""
        return self._res(handle, "ibv_query_qp").rd_atomic()

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
        return read_event(self._lib.cm, self._ch, self._poller, self._ids, timeout_s)

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
        self._ids.retire(handle, cm)
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
        self._ids.retire(handle, cm)
        if qp:
            call("ibv_destroy_qp", self._lib.verbs.ibv_destroy_qp, qp)
        if cm.res is not None:
            cm.res.release()
        return returned_us

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

    def handles(self) -> list[int]:
        """The handles of the cm_ids alive on this channel."""
        return self._ids.handles()

    def close(self) -> None:
        """Destroy every cm_id (newest first) and the channel; raises the first failure."""
        first: RdmaError | None = None
        for handle in reversed(self._ids.handles()):
            try:
                self.destroy_id(handle)
            except RdmaError as exc:
                first = first or exc
        self._qps.release()  # after every QP on them
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
