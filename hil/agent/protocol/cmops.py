"""A CM endpoint's operations (``cm_call``'s ``op``; cm/worker.py on the agent):
their params and replies, each declared as a :class:`CMOp`.  The log and its
``events`` op are in ``cmevents.py``, scripts in ``scenario.py``, storms in
``storm.py``."""

from __future__ import annotations

from typing import Literal, TypedDict, get_args

from .host import NoParams
from .names import AutoAnswer, DestroyOrder, StreamMode
from .spec import CMOp

__all__ = [
    "ListenParams", "ConnectParams", "IdParams", "AnswerParams", "AcceptParams", "DestroyParams",
    "RemoteBuffer",
    "StreamStartParams", "WriteParams", "PauseParams", "TimedReply", "DestroyReply",
    "IdTimedReply", "QPInfo", "ConnectReply", "AcceptReply", "StreamStats", "StreamStopReply",
    "WriteReply", "HandlesReply", "CMErrorDetails", "OP_LISTEN", "OP_CONNECT", "OP_ACCEPT",
    "OP_REJECT", "OP_DISCONNECT", "OP_QP_ERR", "OP_DESTROY", "OP_STREAM_START", "OP_STREAM_STOP",
    "OP_STREAM_STATS", "OP_WRITE", "OP_PAUSE", "OP_HANDLES", "QueryQPReply", "OP_QUERY_QP",
    "RegionAccess", "REGION_ACCESS", "RegMrParams", "RegMrReply", "OP_REG_MR",
]  # fmt: skip


class _ListenRequired(TypedDict):
    address: str
    port: int


class ListenParams(_ListenRequired, total=False):
    backlog: int
    auto: AutoAnswer | None
    private_data: str  # hex


class _ConnectRequired(TypedDict):
    dst: str
    port: int


class ConnectParams(_ConnectRequired, total=False):
    src: str | None
    private_data: str  # hex
    resolve_timeout: float
    ird: int  # rdma_conn_param.responder_resources (default 1; 255: the device's maximum)
    ord: int  # rdma_conn_param.initiator_depth (likewise)


class IdParams(TypedDict):
    id: int  # a cm_id handle of the endpoint


class AnswerParams(IdParams, total=False):
    private_data: str  # hex


class AcceptParams(AnswerParams, total=False):
    ird: int  # as ConnectParams'
    ord: int


class DestroyParams(IdParams, total=False):
    order: DestroyOrder  # default qp_first


class RemoteBuffer(TypedDict):
    addr: int
    rkey: int


class StreamStartParams(IdParams, total=False):
    mode: StreamMode
    size: int
    depth: int
    remote: RemoteBuffer | None  # the peer's buffer, for RDMA WRITEs


class _WriteRequired(IdParams):
    remote: RemoteBuffer  # where to write: the peer's buffer, or a wrong rkey or address


class WriteParams(_WriteRequired, total=False):
    length: int
    wait: float  # seconds to wait for the completion


class PauseParams(TypedDict, total=False):
    on: bool


class TimedReply(TypedDict):
    """An operation's start (host CLOCK_MONOTONIC, µs) and how long it took (µs)."""

    t_us: int
    us: int


class DestroyReply(TimedReply, total=False):
    """``us``: how long rdma_destroy_id blocked (with the QP's destroy before it, qp_first);
    ``qp_us``: id_first's QP destroy after the id's."""

    qp_us: int


class IdTimedReply(TimedReply):
    id: int  # the cm_id the operation made


class QPInfo(TypedDict):
    """A QP and its registered buffer: what a peer needs for RDMA WRITEs into it."""

    qp_num: int
    addr: int
    rkey: int
    length: int


class ConnectReply(IdTimedReply):
    """``local``, ``remote``: the id's rdma_get_local_addr / rdma_get_peer_addr when
    rdma_connect returned, ``ip:port`` ("" while unknown), read apart from its events."""

    qp: QPInfo
    local: str
    remote: str


class AcceptReply(TimedReply):
    """``local``, ``remote``: the id's addresses when rdma_accept returned (as ConnectReply's)."""

    qp: QPInfo
    local: str
    remote: str


class QueryQPReply(TimedReply):
    """ibv_query_qp(3)'s ``max_rd_atomic`` (the RDMA READs this QP may have outstanding
    as initiator: its ORD) and ``max_dest_rd_atomic`` (those it takes as responder: its
    IRD), as the provider fills them."""

    max_rd_atomic: int
    max_dest_rd_atomic: int


# ibv_reg_mr(3)'s access flags a region may be given, by name (IBV_ACCESS_LOCAL_WRITE 1,
# IBV_ACCESS_REMOTE_WRITE 2, IBV_ACCESS_REMOTE_READ 4: verbs.h); remote_write needs local_write.
RegionAccess = Literal["local_write", "remote_write", "remote_read"]
REGION_ACCESS: tuple[RegionAccess, ...] = get_args(RegionAccess)


class _RegMrRequired(IdParams):
    length: int  # bytes


class RegMrParams(_RegMrRequired, total=False):
    access: list[RegionAccess] | None  # default (None): every one


class RegMrReply(TimedReply):
    """A region registered on the id's PD (ibv_reg_mr): its ``stag`` (the rkey), ``base``
    (its first byte's address: the TO a peer writes to or reads from) and ``length``;
    deregistered with the id's QP."""

    stag: int
    base: int
    length: int
    access: list[RegionAccess]


class StreamStats(TypedDict):
    mode: StreamMode
    ops: int
    bytes: int
    error: str | None  # the first failed post or completion
    error_t_us: int | None


class StreamStopReply(TimedReply, StreamStats):
    pass


class WriteReply(TimedReply):
    """One signaled RDMA WRITE: posted at ``t_us``, completed ``us`` later with ``wc_status``."""

    wr_id: int
    wc_status: int  # enum ibv_wc_status (0 success, 5 flushed, 10 remote access error)
    wc_status_name: str  # IBV_WC_REM_ACCESS_ERR
    vendor_err: int


class HandlesReply(TypedDict):
    ids: list[int]


class CMErrorDetails(TypedDict, total=False):
    """``details`` of an ``rdma`` error: the errno, and when the operation ran."""

    errno: int | None
    errno_name: str
    handle: int  # the cm_id it made before failing (connect)
    t_us: int
    us: int


OP_LISTEN = CMOp("listen", ListenParams, IdTimedReply)
OP_CONNECT = CMOp("connect", ConnectParams, ConnectReply)
OP_ACCEPT = CMOp("accept", AcceptParams, AcceptReply)
OP_REJECT = CMOp("reject", AnswerParams, TimedReply)
OP_DISCONNECT = CMOp("disconnect", IdParams, TimedReply)
OP_QP_ERR = CMOp("qp_err", IdParams, TimedReply)
OP_DESTROY = CMOp("destroy", DestroyParams, DestroyReply)
OP_STREAM_START = CMOp("stream_start", StreamStartParams, TimedReply)
OP_STREAM_STOP = CMOp("stream_stop", IdParams, StreamStopReply)
OP_STREAM_STATS = CMOp("stream_stats", IdParams, StreamStats)
OP_WRITE = CMOp("write", WriteParams, WriteReply)
OP_PAUSE = CMOp("pause", PauseParams, TimedReply)
OP_HANDLES = CMOp("handles", NoParams, HandlesReply)
OP_QUERY_QP = CMOp("query_qp", IdParams, QueryQPReply)
OP_REG_MR = CMOp("reg_mr", RegMrParams, RegMrReply)
