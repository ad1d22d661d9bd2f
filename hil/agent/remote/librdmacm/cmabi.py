"""librdmacm's ABI as ctypes declares it: constants, structs, signatures, and sockaddrs.

Struct layouts are rdma-core's ``rdma/rdma_cma.h`` on x86_64 (rdma-core 44).
:class:`Lib` loads librdmacm with these signatures and libibverbs with
:mod:`.verbsabi`'s.
"""

from __future__ import annotations

import ctypes
import errno
import socket
import struct
from ctypes import POINTER, Structure, c_int, c_uint8, c_uint32, c_void_p

from ...protocol import CM_EVENT_TYPES
from .cdll import RdmaError, Signatures, load
from .verbsabi import SIGNATURES as VERBS_SIGNATURES

# enum rdma_cm_event_type: the name of event number i is EVENT_NAMES[i].
EVENT_NAMES = CM_EVENT_TYPES
RDMA_PS_TCP = 0x0106
MAX_PRIVATE_DATA = 255  # rdma_conn_param.private_data_len is a uint8_t
# responder_resources (IRD) and initiator_depth (ORD) are uint8_t too; librdmacm reads
# 255 as "the device's maximum" (RDMA_MAX_RESP_RES, RDMA_MAX_INIT_DEPTH, rdma_cma.h).
MAX_DEPTH = 255
# rdma_resolve_addr's and rdma_resolve_route's timeout: far above a lab's, a bound still
RESOLVE_MS = 2000


class ConnParam(Structure):
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


class CMEventStruct(Structure):
    """struct rdma_cm_event."""

    # param is a union of conn and ud; only conn is read (iWARP has no UD).
    _fields_ = [
        ("id", c_void_p),
        ("listen_id", c_void_p),
        ("event", c_int),
        ("status", c_int),
        ("conn", ConnParam),
        ("_ud_rest", c_uint8 * 32),
    ]


SOCKADDR_STORAGE = 128  # sizeof(struct sockaddr_storage)


class CMIdHead(Structure):
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
ROUTE_SRC = CMIdHead.src.offset
ROUTE_DST = CMIdHead.dst.offset

SIGNATURES: Signatures = {
    "rdma_create_event_channel": (c_void_p, []),
    "rdma_destroy_event_channel": (None, [c_void_p]),
    "rdma_create_id": (c_int, [c_void_p, POINTER(c_void_p), c_void_p, c_int]),
    "rdma_destroy_id": (c_int, [c_void_p]),
    "rdma_bind_addr": (c_int, [c_void_p, c_void_p]),
    "rdma_resolve_addr": (c_int, [c_void_p, c_void_p, c_void_p, c_int]),
    "rdma_resolve_route": (c_int, [c_void_p, c_int]),
    "rdma_listen": (c_int, [c_void_p, c_int]),
    "rdma_connect": (c_int, [c_void_p, POINTER(ConnParam)]),
    "rdma_accept": (c_int, [c_void_p, POINTER(ConnParam)]),
    "rdma_reject": (c_int, [c_void_p, c_void_p, c_uint8]),
    "rdma_disconnect": (c_int, [c_void_p]),
    "rdma_create_qp": (c_int, [c_void_p, c_void_p, c_void_p]),
    "rdma_destroy_qp": (None, [c_void_p]),
    "rdma_get_cm_event": (c_int, [c_void_p, POINTER(POINTER(CMEventStruct))]),
    "rdma_ack_cm_event": (c_int, [POINTER(CMEventStruct)]),
}


class Lib:
    """librdmacm.so.1 (``cm``) and libibverbs.so.1 (``verbs``), their functions typed."""

    def __init__(self, cm: str = "librdmacm.so.1", verbs: str = "libibverbs.so.1") -> None:
        self.cm = load(cm, SIGNATURES, "librdmacm1")
        self.verbs = load(verbs, VERBS_SIGNATURES, "libibverbs1")


def conn_param(private_data: bytes, ird: int = 1, ord: int = 1) -> ConnParam:
    """The struct rdma_conn_param of a connect or an accept: private data, the IRD
    (``responder_resources``) and ORD (``initiator_depth``) asked for, retries."""
    if len(private_data) > MAX_PRIVATE_DATA:
        raise RdmaError(
            "conn_param", errno.EINVAL, f"private data longer than {MAX_PRIVATE_DATA} bytes"
        )
    for name, value in (("ird", ird), ("ord", ord)):
        if not 0 <= value <= MAX_DEPTH:
            raise RdmaError(
                "conn_param", errno.EINVAL, f"{name} must be 0..{MAX_DEPTH}, not {value}"
            )
    buf = ctypes.create_string_buffer(private_data, len(private_data) or 1)
    param = ConnParam(
        private_data=ctypes.addressof(buf) if private_data else None,
        private_data_len=len(private_data),
        responder_resources=ird,
        initiator_depth=ord,
        retry_count=7,
        rnr_retry_count=7,
    )
    param._keep = buf  # the buffer must live as long as param
    return param


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
