"""libibverbs' ABI as ctypes declares it: constants, structs, function types and signatures.

Struct layouts and offsets are rdma-core's ``infiniband/verbs.h`` on x86_64
(rdma-core 44); the resources built on them are :mod:`.ibverbs`'s.
"""

from __future__ import annotations

import ctypes
from ctypes import POINTER, Structure, c_int, c_uint8, c_uint32, c_uint64, c_void_p

from .cdll import Signatures

IBV_QPT_RC = 2
IBV_QP_STATE = 1
IBV_QPS_ERR = 6
IBV_WR_RDMA_WRITE = 0
IBV_WR_SEND = 2
IBV_WR_RDMA_READ = 4
IBV_WC_RECV = 128  # enum ibv_wc_opcode: receive completions have this bit set
IBV_SEND_SIGNALED = 2
ACCESS_ALL = 1 | 2 | 4  # IBV_ACCESS_LOCAL_WRITE | REMOTE_WRITE | REMOTE_READ
# The same flags by the names a reg_mr op takes (enum ibv_access_flags, verbs.h).
ACCESS_FLAGS = {"local_write": 1, "remote_write": 2, "remote_read": 4}
QP_ATTR_SIZE = 144  # sizeof(struct ibv_qp_attr): only qp_state is set, the rest zero
QP_NUM_OFFSET = 52  # offsetof(struct ibv_qp, qp_num)
# ibv_query_qp's mask bits and where struct ibv_qp_attr keeps the two depths (each a
# uint8_t): after 9 u32s, ibv_qp_cap (20 bytes), two ibv_ah_attr (32 each), two u16s
# and two u8s.
IBV_QP_MAX_QP_RD_ATOMIC, IBV_QP_MAX_DEST_RD_ATOMIC = 1 << 13, 1 << 17
QP_ATTR_MAX_RD_ATOMIC, QP_ATTR_MAX_DEST_RD_ATOMIC = 126, 127
QP_INIT_ATTR_SIZE = 64  # sizeof(struct ibv_qp_init_attr)
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


def wc_status_name(status: int) -> str:
    """``"IBV_WC_REM_ACCESS_ERR"`` for 10; a number libibverbs does not name stays a number."""
    return WC_STATUS_NAMES[status] if 0 <= status < len(WC_STATUS_NAMES) else str(status)


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
    "ibv_query_qp": (c_int, [c_void_p, c_void_p, c_int, c_void_p]),
    "ibv_destroy_qp": (c_int, [c_void_p]),
}
