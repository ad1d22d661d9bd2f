"""libibverbs through ctypes: the QP, CQ, PD and MR side of the CM layer's cm_ids.

Standard library only and nothing from the rest of ``hil``: it runs inside
the remote agent (see the package's doc).  The structs and offsets it uses
are :mod:`.verbsabi`'s.
"""

from __future__ import annotations

import ctypes
import errno
from ctypes import POINTER, byref, c_int, c_uint32, c_void_p

from ...protocol import QPInfo, RegionAccess
from .cdll import RdmaError, call, fail
from .verbsabi import (
    ACCESS_ALL,
    ACCESS_FLAGS,
    IBV_QP_MAX_DEST_RD_ATOMIC,
    IBV_QP_MAX_QP_RD_ATOMIC,
    IBV_QP_STATE,
    IBV_QPS_ERR,
    IBV_QPT_RC,
    IBV_SEND_SIGNALED,
    IBV_WR_RDMA_WRITE,
    IBV_WR_SEND,
    OPS_POLL_CQ,
    OPS_POST_RECV,
    OPS_POST_SEND,
    POLL_CQ,
    POST_RECV,
    POST_SEND,
    QP_ATTR_MAX_DEST_RD_ATOMIC,
    QP_ATTR_MAX_RD_ATOMIC,
    QP_ATTR_SIZE,
    QP_INIT_ATTR_SIZE,
    QP_NUM_OFFSET,
    SGE,
    WC,
    QPCap,
    QPInitAttr,
    RecvWR,
    SendWR,
)


def _op(obj: int, offset: int) -> int:
    """A function pointer from the ops table of the context a QP or CQ belongs to."""
    context = c_void_p.from_address(obj).value  # first field of ibv_qp / ibv_cq
    if not context:
        raise RdmaError("ibv_context", errno.EFAULT, "object has no device context")
    return int(c_void_p.from_address(context + offset).value or 0)


class SharedPD:
    """One PD and one CQ that many traffic-less RC QPs share, as rdma-core's cmtime's do.

    A QP made on them (``rdma_create_qp`` with :meth:`init_attr`) carries no
    buffer and no receives: a storm's connections only connect and close, so
    their per-connection cost is the QP alone.  Released after the last QP.
    """

    def __init__(self, lib: ctypes.CDLL, context: int, cqe: int = 16) -> None:
        self._lib = lib
        self.pd = lib.ibv_alloc_pd(context) or fail("ibv_alloc_pd")
        self.cq = lib.ibv_create_cq(context, cqe, None, None, 0)
        if not self.cq:
            err = ctypes.get_errno() or errno.EIO
            lib.ibv_dealloc_pd(self.pd)
            raise RdmaError("ibv_create_cq", err)
        cap = QPCap(max_send_wr=1, max_recv_wr=1, max_send_sge=1, max_recv_sge=1)
        # One struct for every QP (rdma_create_qp only reads it): none is built per call.
        self.attr = QPInitAttr(send_cq=self.cq, recv_cq=self.cq, qp_type=IBV_QPT_RC, cap=cap)

    def release(self) -> None:
        """Destroy the CQ and free the PD (every QP on them must be gone)."""
        self._lib.ibv_destroy_cq(self.cq)
        self._lib.ibv_dealloc_pd(self.pd)


class QPResources:
    """A PD, a CQ and a registered buffer for one cm_id's RC QP, and traffic on it.

    Made before ``rdma_create_qp`` (which takes :meth:`init_attr`); the QP
    itself belongs to the cm_id, so :meth:`attach` is given its pointer.
    """

    def __init__(self, lib: ctypes.CDLL, context: int, depth: int, buf_size: int) -> None:
        self._lib = lib
        self.depth = depth
        self.qp = 0
        # Regions registered beside the buffer (reg_mr), each with its memory: kept alive
        # until release, deregistered before the PD.  Set first: release() reads it,
        # also when the CQ or the buffer's MR below fails.
        self.regions: list[tuple[object, ctypes.Array[ctypes.c_char]]] = []
        self.pd = lib.ibv_alloc_pd(context) or fail("ibv_alloc_pd")
        self.cq = lib.ibv_create_cq(context, 2 * depth, None, None, 0) or None
        self.buf = ctypes.create_string_buffer(buf_size)
        self.mr = lib.ibv_reg_mr(self.pd, self.buf, buf_size, ACCESS_ALL) if self.cq else None
        if not self.cq or not self.mr:
            op = "ibv_create_cq" if not self.cq else "ibv_reg_mr"
            err = ctypes.get_errno() or errno.EIO
            self.release()
            raise RdmaError(op, err)
        self._wr_id = 0
        self.outstanding: set[int] = set()  # wr_ids posted and not yet polled

    def init_attr(self) -> QPInitAttr:
        """The struct ibv_qp_init_attr for an RC QP on this CQ."""
        cap = QPCap(max_send_wr=self.depth, max_recv_wr=self.depth, max_send_sge=1, max_recv_sge=1)
        return QPInitAttr(send_cq=self.cq, recv_cq=self.cq, qp_type=IBV_QPT_RC, cap=cap)

    def attach(self, qp: int) -> QPInfo:
        """Record the QP made on these resources; returns what a peer needs to know."""
        self.qp = qp
        assert self.mr is not None
        return {
            "qp_num": c_uint32.from_address(qp + QP_NUM_OFFSET).value,
            "addr": ctypes.addressof(self.buf),
            "rkey": self.mr.contents.rkey,
            "length": len(self.buf),
        }

    def register(self, length: int, access: list[RegionAccess]) -> tuple[int, int]:
        """Register ``length`` more bytes on the QP's PD with ``access`` (ibv_reg_mr(3));
        its rkey and address.  RdmaError (EINVAL) for a length below 1 or a flag unknown."""
        unknown = [a for a in access if a not in ACCESS_FLAGS]
        if length < 1 or unknown:
            why = f"unknown access {unknown}" if unknown else "length must be >= 1"
            raise RdmaError("ibv_reg_mr", errno.EINVAL, why)
        buf = ctypes.create_string_buffer(length)
        flags = sum(ACCESS_FLAGS[a] for a in set(access))
        mr = self._lib.ibv_reg_mr(self.pd, buf, length, flags)
        if not mr:
            raise RdmaError("ibv_reg_mr", ctypes.get_errno() or errno.EIO)
        self.regions.append((mr, buf))
        return int(mr.contents.rkey), ctypes.addressof(buf)

    def to_error(self) -> None:
        """Move the QP to ERR (an abortive close on iWARP)."""
        attr = ctypes.create_string_buffer(QP_ATTR_SIZE)
        c_int.from_buffer(attr).value = IBV_QPS_ERR  # qp_state is the first field
        call("ibv_modify_qp", self._lib.ibv_modify_qp, self.qp, attr, IBV_QP_STATE)

    def rd_atomic(self) -> tuple[int, int]:
        """ibv_query_qp's ``max_rd_atomic`` and ``max_dest_rd_atomic`` of the QP."""
        attr = ctypes.create_string_buffer(QP_ATTR_SIZE)
        init = ctypes.create_string_buffer(QP_INIT_ATTR_SIZE)
        mask = IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_MAX_DEST_RD_ATOMIC
        call("ibv_query_qp", self._lib.ibv_query_qp, self.qp, attr, mask, init)
        return attr.raw[QP_ATTR_MAX_RD_ATOMIC], attr.raw[QP_ATTR_MAX_DEST_RD_ATOMIC]

    def _sge(self, length: int) -> SGE:
        assert self.mr is not None
        return SGE(ctypes.addressof(self.buf), length, self.mr.contents.lkey)

    def post_recv(self, count: int) -> None:
        """Post ``count`` receives, each of the whole buffer."""
        post = POST_RECV(_op(self.qp, OPS_POST_RECV))
        for _ in range(count):
            self._wr_id += 1
            sge = self._sge(len(self.buf))
            wr = RecvWR(wr_id=self._wr_id, sg_list=ctypes.pointer(sge), num_sge=1)
            call("ibv_post_recv", post, self.qp, byref(wr), byref(POINTER(RecvWR)()))
            self.outstanding.add(self._wr_id)

    def post_send(self, length: int, remote: tuple[int, int] | None) -> int:
        """Post one signaled SEND, or RDMA WRITE to ``remote`` = (addr, rkey); returns wr_id."""
        if not 0 < length <= len(self.buf):
            raise RdmaError("ibv_post_send", errno.EINVAL, f"length must be 1..{len(self.buf)}")
        return self.post(IBV_WR_SEND if remote is None else IBV_WR_RDMA_WRITE, length, 0, remote)

    def post(
        self, opcode: int, length: int, offset: int, remote: tuple[int, int] | None = None
    ) -> int:
        """Post one signaled work request on ``length`` bytes of the buffer from ``offset``
        (0 bytes: no SGE, a zero-length SEND); returns its wr_id."""
        if length < 0 or offset < 0 or offset + length > len(self.buf):
            raise RdmaError(
                "ibv_post_send", errno.EINVAL, f"bytes {offset}..{offset + length} past the buffer"
            )
        self._wr_id += 1
        sge = self._sge(length)
        sge.addr += offset
        wr = SendWR(
            wr_id=self._wr_id,
            sg_list=ctypes.pointer(sge),
            num_sge=1 if length else 0,
            opcode=opcode,
            send_flags=IBV_SEND_SIGNALED,
        )
        if remote is not None:
            wr.remote_addr, wr.rkey = remote
        post = POST_SEND(_op(self.qp, OPS_POST_SEND))
        call("ibv_post_send", post, self.qp, byref(wr), byref(POINTER(SendWR)()))
        self.outstanding.add(self._wr_id)
        return self._wr_id

    def poll(self, max_entries: int) -> list[dict[str, int]]:
        """Completions ready on the CQ (never waits)."""
        if not self.cq:
            raise RdmaError("ibv_poll_cq", errno.EBADF, "the CQ was released")
        wcs = (WC * max_entries)()
        n = POLL_CQ(_op(self.cq, OPS_POLL_CQ))(self.cq, max_entries, wcs)
        if n < 0:
            raise RdmaError("ibv_poll_cq", -n if n < -1 else errno.EIO)
        self.outstanding.difference_update(w.wr_id for w in wcs[:n])
        return [
            {
                "wr_id": w.wr_id,
                "status": w.status,
                "opcode": w.opcode,
                "byte_len": w.byte_len,
                "vendor_err": w.vendor_err,
            }
            for w in wcs[:n]
        ]

    def release(self) -> None:
        """Deregister the buffer and regions, destroy the CQ, free the PD (after the QP is gone)."""
        for mr, _ in self.regions:
            self._lib.ibv_dereg_mr(mr)
        self.regions.clear()
        if self.mr:
            self._lib.ibv_dereg_mr(self.mr)
        if self.cq:
            self._lib.ibv_destroy_cq(self.cq)
        if self.pd:
            self._lib.ibv_dealloc_pd(self.pd)
        self.mr = self.cq = self.pd = None
