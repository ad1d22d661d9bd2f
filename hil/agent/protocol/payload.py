"""A connection's payload checked byte for byte (``cm_call`` op ``payload``; cm/payload.py
on the agent): both ends of one connection run it at once, each with the other's buffer."""

from __future__ import annotations

from typing import Literal, TypedDict

from .cmops import IdParams, QPInfo, TimedReply
from .spec import CMOp

__all__ = [
    "PayloadOpName", "PAYLOAD_OPS", "PayloadParams", "PayloadCheck", "PayloadReply", "OP_PAYLOAD",
    "ReadsParams", "ReadsReply", "OP_READS", "FlushedParams", "FlushedWC", "FlushedReply",
    "OP_FLUSHED", "LastSendsParams", "LastSendsReply", "OP_LAST_SENDS", "LastReceivesParams",
    "LastWC", "LastReceivesReply", "OP_LAST_RECEIVES", "ReceivedParams", "ReceivedReply",
    "OP_RECEIVED", "MessagesParams", "MessagesReply", "OP_MESSAGES", "RpingRole", "RpingParams",
    "RpingCheck", "RpingReply", "OP_RPING", "SendBwPhase", "SendBwParams", "SendBwDest",
    "SendBwReply", "OP_SEND_BW",
]  # fmt: skip

# What carries the data a side checks: the peer's SEND or RDMA WRITE into this side's
# buffer, or this side's RDMA READ of the peer's buffer.
PayloadOpName = Literal["send", "write", "read"]
PAYLOAD_OPS: tuple[PayloadOpName, ...] = ("send", "write", "read")


class _PayloadRequired(IdParams):
    first: bool  # the end that acts first in each pair of steps (the active side)
    peer: QPInfo  # the other end's buffer (connect's or accept's reply)
    peer_address: str  # the other end's data address: the route's MTU is read toward it


class PayloadParams(_PayloadRequired, total=False):
    seed: int  # the pattern's seed (both ends the same)
    mtu: int  # 0 (default): the route's (IP_MTU toward peer_address)
    wait: float  # seconds each completion may take


class PayloadCheck(TypedDict):
    """One message this side checked: the data came from the peer (``op`` says how).

    ``offset`` is the first bad byte (-1 when all are right; the message's length
    when fewer bytes came than sent) and ``expected``/``got`` its values (-1: none).
    """

    op: PayloadOpName
    size: int
    ok: bool
    offset: int
    expected: int
    got: int


class PayloadReply(TimedReply):
    """What this side checked, the sizes both ends agreed on, and the first error (a
    failed post, an error completion, a timeout) that stopped the run, if any."""

    mtu: int  # the smaller of the two ends' route MTUs
    sizes: list[int]
    checks: list[PayloadCheck]
    error: str | None


OP_PAYLOAD = CMOp("payload", PayloadParams, PayloadReply)


class _ReadsRequired(IdParams):
    reader: bool  # this end posts the READs; the other end's buffer is read
    peer: QPInfo  # the other end's buffer
    count: int  # READs posted at once, each of an equal slice of the buffers


class ReadsParams(_ReadsRequired, total=False):
    seed: int  # the pattern's seed (both ends the same)
    wait: float  # seconds each completion may take


class ReadsReply(TimedReply):
    """``count`` RDMA READs posted at once by the reader, each of ``size`` bytes at its own
    offset: the reader's check of each (``op`` read), and the error that stopped it."""

    count: int
    size: int
    checks: list[PayloadCheck]
    error: str | None


OP_READS = CMOp("reads", ReadsParams, ReadsReply)


class FlushedParams(IdParams, total=False):
    wait: float  # seconds every posted work request may take to complete


class FlushedWC(TypedDict):
    """One completion the CQ gave: its work request and status (ibv_wc_status)."""

    wr_id: int
    status: int


class FlushedReply(TimedReply):
    """A QP's CQ drained after it went to ERR: the work requests ``posted`` and not yet
    completed when the drain began, every completion the CQ then gave, in order (a
    double one included), and the error that stopped the drain, if any."""

    posted: list[int]
    completions: list[FlushedWC]
    error: str | None


OP_FLUSHED = CMOp("flushed", FlushedParams, FlushedReply)


class _LastRequired(IdParams):
    count: int  # SENDs posted right before the close (each of its own length and seed)


class LastSendsParams(_LastRequired, total=False):
    seed: int  # the pattern's seed (both ends the same): SEND i carries seed + i
    wait: float  # seconds the SENDs' completions may take


class LastSendsReply(TimedReply):
    """The ``count`` SENDs posted and completed right before this end closes: their
    ``lengths`` in posting order, and the error (a failed post or completion, a
    timeout) that stopped them, if any."""

    lengths: list[int]
    error: str | None


class LastReceivesParams(_LastRequired, total=False):
    seed: int
    wait: float  # seconds the SENDs and the DISCONNECTED may take


class LastWC(TypedDict):
    """One completion of the receiving end: status, length, and ``poll_us``, the host
    time (CLOCK_MONOTONIC, as events' ``host_t_us``) the poll that returned it began."""

    status: int
    byte_len: int
    poll_us: int


class LastReceivesReply(TimedReply):
    """The receiving end of the SENDs posted before a close: the first ``count``
    completions its CQ gave; ``event_us``, the DISCONNECTED's host time (0: none came);
    ``seen_us``, the start of the first poll begun after this end saw it (0: none); the
    check of each SEND's bytes (``op`` send) and the error that stopped it."""

    lengths: list[int]
    completions: list[LastWC]
    event_us: int
    seen_us: int
    checks: list[PayloadCheck]
    error: str | None


OP_LAST_SENDS = CMOp("last_sends", LastSendsParams, LastSendsReply)
OP_LAST_RECEIVES = CMOp("last_receives", LastReceivesParams, LastReceivesReply)


class ReceivedParams(IdParams, total=False):
    wait: float  # seconds the receive may take
    size: int  # the bytes the peer sent, the whole message checked (0, the default: none)
    seed: int  # their pattern's seed (0 by default)


class ReceivedReply(TimedReply):
    """The next receive completion of the cm_id's QP (the reference peer's SEND, issue 26):
    its ``status`` (ibv_wc_status; -1: none within ``wait``), ``byte_len`` and the first
    ``byte_len`` bytes (at most 256) of the buffer it landed in, hex; one receive is posted
    again in its place.  ``checks`` holds the check of the whole message against the
    pattern of ``seed`` when the params gave its ``size`` (a SEND the peer filled with it;
    a kernel consumer's, issue 28), else nothing."""

    status: int
    byte_len: int
    data: str
    error: str | None
    checks: list[PayloadCheck]


OP_RECEIVED = CMOp("received", ReceivedParams, ReceivedReply)


class _MessagesRequired(IdParams):
    count: int  # SENDs each way
    size: int  # bytes of each SEND this end posts
    send_first: bool  # this end SENDs its ``count`` first, then takes the peer's


class MessagesParams(_MessagesRequired, total=False):
    seed: int  # the pattern this end's SENDs carry
    wait: float  # seconds each completion may take


class MessagesReply(TimedReply):
    """rdma-core's ucmatose exchange (librdmacm/examples/cmatose.c: its server SENDs
    ``message_count`` messages, then takes as many; its client the other way round)
    served by one end: the ``byte_len`` of each receive in order, the SENDs it posted
    and saw complete, and the error (a failed post, an error completion, a timeout)
    that stopped it."""

    received: list[int]
    sent: int
    error: str | None


OP_MESSAGES = CMOp("messages", MessagesParams, MessagesReply)


RpingRole = Literal["client", "server"]


class _RpingRequired(IdParams):
    role: RpingRole  # the part of rping's protocol this end plays
    count: int  # pings


class RpingParams(_RpingRequired, total=False):
    size: int  # the client's ping size (rping -S); a server takes the client's
    wait: float  # seconds each completion may take


class RpingCheck(TypedDict):
    """One ping as this end checked it: its ``size``; for a client, whether the peer's
    RDMA WRITE into the sink gave back the start buffer it RDMA READ (rping -V's
    memcmp; ``offset`` the first bad byte, -1: none); for a server, whether the
    buffer it read is rping's text for that ping."""

    ping: int
    size: int
    ok: bool
    offset: int


class RpingReply(TimedReply):
    """rdma-core's rping protocol (librdmacm/examples/rping.c) played by one end: each
    ping's check, the start of what was read or sent (``text``), and the error (a
    bad advertisement, a failed post or completion, a timeout) that stopped it."""

    checks: list[RpingCheck]
    text: list[str]
    error: str | None


OP_RPING = CMOp("rping", RpingParams, RpingReply)


# perftest's ib_send_bw -R served as its server (cm/perftest.py): "setup", the control
# exchanges before the data connection; "run", those after it, the SENDs and the close.
SendBwPhase = Literal["setup", "run"]


class _SendBwRequired(IdParams):
    phase: SendBwPhase  # id: the control connection's


class SendBwParams(_SendBwRequired, total=False):
    data: int  # run: the data connection's id (accepted after setup)
    iters: int  # run: the client's SENDs (ib_send_bw -n)
    wait: float  # seconds each completion may take


class SendBwDest(TypedDict):
    """The client's ``struct pingpong_dest`` as it sent it (docs/notes/perftest-R-protocol.md):
    its data QP's number and PSN, and where it takes credits (rkey, vaddr)."""

    lid: int
    out_reads: int
    qpn: int
    psn: int
    rkey: int
    vaddr: int
    gid: str  # hex
    srqn: int
    gid_index: int


class SendBwReply(TimedReply):
    """One phase of ib_send_bw -R's exchange served by this end: the length of each control
    message the client sent, in order; what setup read (the client's version, page and
    cache line sizes, MTU digit); what run read (its dest, each SEND's length) and the
    credits this end RDMA WROTE back; the error (a wrong length, a failed post or
    completion, a timeout) that stopped it."""

    control: list[int]
    version: str
    cycle_buffer: int
    cache_line: int
    mtu: str
    dest: SendBwDest | None
    received: list[int]
    credits: list[int]
    error: str | None


OP_SEND_BW = CMOp("send_bw", SendBwParams, SendBwReply)
