"""libibverbs through ctypes: the QP, CQ, PD and MR side of :mod:`hil.agent.remote.librdmacm`.

Standard library only and nothing from the rest of ``hil``: it runs inside
the remote agent next to ``librdmacm.py`` (bundle the two files together).
Struct layouts and offsets are rdma-core's ``infiniband/verbs.h`` on x86_64.
Also home of the errors both modules raise.
"""

from __future__ import annotations

import ctypes
import errno
import os
from collections.abc import Mapping
from ctypes import POINTER, Structure, byref, c_int, c_uint8, c_uint32, c_uint64, c_void_p
from typing import NoReturn

from .protocol import QPInfo

IBV_QPT_RC = 2
IBV_QP_STATE = 1
IBV_QPS_ERR = 6
IBV_WR_RDMA_WRITE = 0
IBV_WR_SEND = 2
IBV_SEND_SIGNALED = 2
ACCESS_ALL = 1 | 2 | 4  # IBV_ACCESS_LOCAL_WRITE | REMOTE_WRITE | REMOTE_READ
QP_ATTR_SIZE = 144  # sizeof(struct ibv_qp_attr): only qp_state is set, the rest zero
QP_NUM_OFFSET = 52  # offsetof(struct ibv_qp, qp_num)
# ibv_post_send/recv and ibv_poll_cq are inline in verbs.h: they call through
# struct ibv_context's ops table, at these byte offsets.
OPS_POLL_CQ, OPS_POST_SEND, OPS_POST_RECV = 96, 208, 216
# enum ibv_wc_status, in its order: the index is the value.
WC_STATUS_NAMES = (
    "IBV_WC_SUCCESS",
    "IBV_WC_LOC_LEN_ERR",
    "IBV_WC_LOC_QP_OP_ERR",
    "IBV_WC_LOC_EEC_OP_ERR",
    "IBV_WC_LOC_PROT_ERR",
    "IBV_WC_WR_FLUSH_ERR",
    "IBV_WC_MW_BIND_ERR",
    "IBV_WC_BAD_RESP_ERR",
    "IBV_WC_LOC_ACCESS_ERR",
    "IBV_WC_REM_INV_REQ_ERR",
    "IBV_WC_REM_ACCESS_ERR",
    "IBV_WC_REM_OP_ERR",
    "IBV_WC_RETRY_EXC_ERR",
    "IBV_WC_RNR_RETRY_EXC_ERR",
    "IBV_WC_LOC_RDD_VIOL_ERR",
    "IBV_WC_REM_INV_RD_REQ_ERR",
    "IBV_WC_REM_ABORT_ERR",
    "IBV_WC_INV_EECN_ERR",
    "IBV_WC_INV_EEC_STATE_ERR",
    "IBV_WC_FATAL_ERR",
    "IBV_WC_RESP_TIMEOUT_ERR",
    "IBV_WC_GENERAL_ERR",
    "IBV_WC_TM_ERR",
    "IBV_WC_TM_RNDV_INCOMPLETE",
)


class RdmaError(OSError):
    """A librdmacm or libibverbs call failed; ``op`` names it, ``errno`` is the C errno."""

    def __init__(self, op: str, err: int, detail: str = "") -> None:
        name = errno.errorcode.get(err, str(err))
        text = f"{op}: {name} ({os.strerror(err)})" + (f": {detail}" if detail else "")
        super().__init__(err, text)
        self.op = op

    def __str__(self) -> str:
        return str(self.strerror)


def wc_status_name(status: int) -> str:
    """``"IBV_WC_REM_ACCESS_ERR"`` for 10; a number libibverbs does not name stays a number."""
    return WC_STATUS_NAMES[status] if 0 <= status < len(WC_STATUS_NAMES) else str(status)


class RdmaUnavailable(RdmaError):
    """This host cannot do RDMA: no library, no RDMA device, or no RDMA CM in the kernel."""


def call(op: str, fn: object, *args: object) -> None:
    """Call a C function that returns 0 on success, raising :class:`RdmaError` otherwise.

    librdmacm returns -1 and sets errno; libibverbs and provider ops return
    the errno itself.
    """
    ret = fn(*args)  # type: ignore[operator]
    if ret > 0:
        raise RdmaError(op, ret)
    if ret < 0:
        raise RdmaError(op, ctypes.get_errno() or (-ret if ret < -1 else errno.EIO))


def fail(op: str) -> NoReturn:
    """Raise for a C function that returned NULL and set errno."""
    raise RdmaError(op, ctypes.get_errno() or errno.EIO)


Signatures = Mapping[str, tuple[object, list[object]]]


def load(soname: str, signatures: Signatures, package: str) -> ctypes.CDLL:
    """dlopen a library and type the functions we call."""
    try:
        lib = ctypes.CDLL(soname, use_errno=True)
    except OSError as exc:
        raise RdmaUnavailable(
            "dlopen", errno.ENOENT, f"{soname}: {exc}; install rdma-core's {package}"
        ) from None
    for name, (restype, argtypes) in signatures.items():
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = restype, argtypes
    return lib


class QPCap(Structure):
    _fields_ = [
        ("max_send_wr", c_uint32),
        ("max_recv_wr", c_uint32),
        ("max_send_sge", c_uint32),
        ("max_recv_sge", c_uint32),
        ("max_inline_data", c_uint32),
    ]


class QPInitAttr(Structure):
    _fields_ = [
        ("qp_context", c_void_p),
        ("send_cq", c_void_p),
        ("recv_cq", c_void_p),
        ("srq", c_void_p),
        ("cap", QPCap),
        ("qp_type", c_int),
        ("sq_sig_all", c_int),
    ]


class SGE(Structure):
    _fields_ = [("addr", c_uint64), ("length", c_uint32), ("lkey", c_uint32)]


class SendWR(Structure):
    # wr_id .. wr.rdma as in verbs.h, then unions the provider does not read
    # for SEND or RDMA WRITE, padded to sizeof(struct ibv_send_wr) = 128.
    _fields_ = [
        ("wr_id", c_uint64),
        ("next", c_void_p),
        ("sg_list", POINTER(SGE)),
        ("num_sge", c_int),
        ("opcode", c_int),
        ("send_flags", c_uint32),
        ("imm_data", c_uint32),
        ("remote_addr", c_uint64),
        ("rkey", c_uint32),
        ("_pad", c_uint8 * 76),
    ]


class RecvWR(Structure):
    _fields_ = [
        ("wr_id", c_uint64),
        ("next", c_void_p),
        ("sg_list", POINTER(SGE)),
        ("num_sge", c_int),
    ]


class WC(Structure):
    _fields_ = [
        ("wr_id", c_uint64),
        ("status", c_int),
        ("opcode", c_int),
        ("vendor_err", c_uint32),
        ("byte_len", c_uint32),
        ("imm_data", c_uint32),
        ("qp_num", c_uint32),
        ("src_qp", c_uint32),
        ("wc_flags", c_uint32),
        ("pkey_index", ctypes.c_uint16),
        ("slid", ctypes.c_uint16),
        ("sl", c_uint8),
        ("dlid_path_bits", c_uint8),
    ]


class MR(Structure):
    _fields_ = [
        ("context", c_void_p),
        ("pd", c_void_p),
        ("addr", c_void_p),
        ("length", ctypes.c_size_t),
        ("handle", c_uint32),
        ("lkey", c_uint32),
        ("rkey", c_uint32),
    ]


POLL_CQ = ctypes.CFUNCTYPE(c_int, c_void_p, c_int, POINTER(WC))
POST_SEND = ctypes.CFUNCTYPE(c_int, c_void_p, POINTER(SendWR), POINTER(POINTER(SendWR)))
POST_RECV = ctypes.CFUNCTYPE(c_int, c_void_p, POINTER(RecvWR), POINTER(POINTER(RecvWR)))

SIGNATURES: Signatures = {
    "ibv_alloc_pd": (c_void_p, [c_void_p]),
    "ibv_dealloc_pd": (c_int, [c_void_p]),
    "ibv_create_cq": (c_void_p, [c_void_p, c_int, c_void_p, c_void_p, c_int]),
    "ibv_destroy_cq": (c_int, [c_void_p]),
    "ibv_reg_mr": (POINTER(MR), [c_void_p, c_void_p, ctypes.c_size_t, c_int]),
    "ibv_dereg_mr": (c_int, [POINTER(MR)]),
    "ibv_modify_qp": (c_int, [c_void_p, c_void_p, c_int]),
    "ibv_destroy_qp": (c_int, [c_void_p]),
}


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

    def to_error(self) -> None:
        """Move the QP to ERR (an abortive close on iWARP)."""
        attr = ctypes.create_string_buffer(QP_ATTR_SIZE)
        c_int.from_buffer(attr).value = IBV_QPS_ERR  # qp_state is the first field
        call("ibv_modify_qp", self._lib.ibv_modify_qp, self.qp, attr, IBV_QP_STATE)

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

    def post_send(self, length: int, remote: tuple[int, int] | None) -> int:
        """Post one signaled SEND, or RDMA WRITE to ``remote`` = (addr, rkey); returns wr_id."""
        if not 0 < length <= len(self.buf):
            raise RdmaError("ibv_post_send", errno.EINVAL, f"length must be 1..{len(self.buf)}")
        self._wr_id += 1
        sge = self._sge(length)
        wr = SendWR(
            wr_id=self._wr_id,
            sg_list=ctypes.pointer(sge),
            num_sge=1,
            opcode=IBV_WR_SEND if remote is None else IBV_WR_RDMA_WRITE,
            send_flags=IBV_SEND_SIGNALED,
        )
        if remote is not None:
            wr.remote_addr, wr.rkey = remote
        post = POST_SEND(_op(self.qp, OPS_POST_SEND))
        call("ibv_post_send", post, self.qp, byref(wr), byref(POINTER(SendWR)()))
        return self._wr_id

    def poll(self, max_entries: int) -> list[dict[str, int]]:
        """Completions ready on the CQ (never waits)."""
        if not self.cq:
            raise RdmaError("ibv_poll_cq", errno.EBADF, "the CQ was released")
        wcs = (WC * max_entries)()
        n = POLL_CQ(_op(self.cq, OPS_POLL_CQ))(self.cq, max_entries, wcs)
        if n < 0:
            raise RdmaError("ibv_poll_cq", -n if n < -1 else errno.EIO)
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
        """Deregister the buffer, destroy the CQ, free the PD (after the QP is gone)."""
        if self.mr:
            self._lib.ibv_dereg_mr(self.mr)
        if self.cq:
            self._lib.ibv_destroy_cq(self.cq)
        if self.pd:
            self._lib.ibv_dealloc_pd(self.pd)
        self.mr = self.cq = self.pd = None
