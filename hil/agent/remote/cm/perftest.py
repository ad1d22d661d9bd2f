"""perftest's ``ib_send_bw -R`` served as its server by one CM endpoint (``cm_call`` op
``send_bw``), so that ib_send_bw's client on the other host has a peer
(hil/cm/toolpeers.py).

Read in perftest v4.5-0.17 (Debian 12's 4.5+0.17, whose programs send the version
"6.06"); every step, its byte layout and its source: docs/notes/perftest-R-protocol.md.
With ``-R`` the client makes two rdma_cm connections to one port: a control connection
first, then the data connection, between two syncs of the control exchange.  Each
control exchange is one SEND each way: the client's first, then the server's, each of
the size the reader expects (the reader never checks ``byte_len``; here each length is
checked).  Phase ``setup`` serves, on the control connection:

1. the version: 16 bytes, NUL-padded (the client exits below "5.70");
2. the page size and 3. the cache line size: 4 bytes each, big-endian;
4. the port's MTU: ``"%d"`` of ``enum ibv_mtu`` and its NUL, 2 bytes (echoed here);
5. a sync of 56 zero bytes, after which the client connects its data connection.

Phase ``run``, once that connection is accepted:

6. a sync of 56 zero bytes;
7.-10. this end's ``struct pingpong_dest`` (:data:`DEST`) for the client's, then three
   syncs of the same (the last one: the receives are posted, the client may send);
   then the client's ``iters`` SENDs on the data connection, and, after each receive
   whose count ``n`` has ``(n % rx_depth) % (rx_depth // 3) == 0``, ``n`` RDMA WRITTEN as
   a host-order u32 into the client's credit slot (its dest's rkey and vaddr), as
   perftest's run_iter_bw_server does on iWARP;
11. the close sync.

Control receives land at the buffer's start; this end builds what it SENDs at
:data:`SEND_AT`.  Its credit word is near the data buffer's end, past any SEND.
"""

from __future__ import annotations

import ctypes
import errno
import random
import struct

from ...protocol import SendBwDest, SendBwParams, SendBwReply
from ..hostclock import now_us, since
from ..librdmacm import RdmaError
from ..librdmacm.ibverbs import QPResources
from ..librdmacm.verbsabi import IBV_WR_RDMA_WRITE, IBV_WR_SEND, QP_NUM_OFFSET
from .payload import QP, PayloadError

VERSION = b"6.06"  # perftest 4.5's VERSION (configure.ac AC_INIT), which it sends
VERSION_SIZE = 16  # char version[MAX_VERSION] (perftest_parameters.h)
SYS = struct.Struct(">i")  # check_sys_data: cycle_buffer, cache_line_size, hton_int
PAGE, CACHE_LINE = 4096, 64  # what this end says; the client keeps the larger of each
MTU_SIZE = 2  # check_mtu: "%d" of enum ibv_mtu and its NUL (peer version >= 5.31)
# struct pingpong_dest on x86-64, each integer htobe32/htobe64 (rdma_write_keys): lid,
# out_reads, qpn, psn, rkey, 4 bytes of padding, vaddr, gid (raw), srqn, gid_index.
DEST = struct.Struct(">iiiiI4xQ16sIi")
CREDIT = struct.Struct("<I")  # run_iter_bw_server: ctrl_buf[qp] = rcnt, a host-order u32
SEND_AT = 1024  # where a control SEND is built (a receive of at most 56 bytes lands at 0)
RX_MAX = 512  # perftest's DEF_RX_SEND
SETUP = (
    ("version", VERSION_SIZE),
    ("page size", SYS.size),
    ("cache line size", SYS.size),
    ("MTU", MTU_SIZE),
    ("sync before the data connection", DEST.size),
)
RUN = (
    "sync after the data connection",
    "QP parameters",
    "sync after the QP parameters",
    "QP parameters again",
    "sync before the SENDs",
)
CLOSE = "sync after the SENDs"


def version_bytes(version: bytes = VERSION) -> bytes:
    """``version`` as perftest sends it: NUL-padded to :data:`VERSION_SIZE` (strncpy)."""
    return version[: VERSION_SIZE - 1].ljust(VERSION_SIZE, b"\0")


def pack_dest(qpn: int, psn: int, rkey: int, vaddr: int, out_reads: int = 1) -> bytes:
    """This end's ``struct pingpong_dest`` as rdma_write_keys sends it: LID 0, zero GID
    (iWARP: both only printed), no SRQ, GID index 0."""
    return DEST.pack(0, out_reads, qpn, psn, rkey, vaddr, bytes(16), 0, 0)


def unpack_dest(data: bytes) -> SendBwDest:
    """A ``struct pingpong_dest`` as the peer sent it (every field, the two
    rdma_read_keys leaves unread too)."""
    lid, out_reads, qpn, psn, rkey, vaddr, gid, srqn, gid_index = DEST.unpack(data)
    return {
        "lid": lid,
        "out_reads": out_reads,
        "qpn": qpn,
        "psn": psn,
        "rkey": rkey,
        "vaddr": vaddr,
        "gid": gid.hex(),
        "srqn": srqn,
        "gid_index": gid_index,
    }


def rx_depth(iters: int) -> int:
    """perftest's server's receive depth for SEND with ``-n iters``: at most 512, clamped
    to ``iters``, made even (perftest_parameters.c force_dependecies)."""
    depth = min(RX_MAX, iters)
    return depth + depth % 2


def credit_after(n: int, iters: int) -> bool:
    """Whether perftest's server writes a credit after its ``n``-th receive."""
    depth = rx_depth(iters)
    return (n % depth) % max(1, depth // 3) == 0


class _Control:
    """The server's side of the control connection: each exchange received, then
    answered; the lengths received kept in order."""

    def __init__(self, res: QPResources, wait: float) -> None:
        self.qp = QP(res, wait, 0)
        self.lengths: list[int] = []

    def exchange(self, what: str, size: int, reply: bytes | None) -> bytes:
        """Take the client's ``size``-byte message and SEND ``reply`` (None: the same
        bytes back); the message's bytes."""
        got = self.qp.received(f"ib_send_bw's {what}")
        self.lengths.append(got)
        if got != size:
            raise PayloadError(f"ib_send_bw's {what}: {got} bytes, not {size}")
        data = ctypes.string_at(self.qp.addr, size)
        answer = data if reply is None else reply
        ctypes.memmove(self.qp.addr + SEND_AT, answer, len(answer))
        self.qp.post(IBV_WR_SEND, len(answer), SEND_AT)
        self.qp.sent(f"hil's {what}")
        return data


def _reply(t0: int, control: list[int], error: str | None) -> SendBwReply:
    return {
        **since(t0),
        "control": control,
        "version": "",
        "cycle_buffer": 0,
        "cache_line": 0,
        "mtu": "",
        "dest": None,
        "received": [],
        "credits": [],
        "error": error,
    }


def _text(data: bytes) -> str:
    """A C string as perftest reads it: up to its NUL."""
    return data.split(b"\0", 1)[0].decode("ascii", "replace")


def setup(res: QPResources, params: SendBwParams) -> SendBwReply:
    """Exchanges 1-5 on the control connection (module doc).  The MTU goes back as the
    client sent it, so the client keeps its own."""
    t0, ctl = now_us(), _Control(res, params.get("wait", 10.0))
    replies = (version_bytes(), SYS.pack(PAGE), SYS.pack(CACHE_LINE), None, bytes(DEST.size))
    got: list[bytes] = []
    error = None
    try:
        for k, (what, size) in enumerate(SETUP):
            got.append(ctl.exchange(what, size, replies[k]))
    except PayloadError as e:
        error = str(e)
    out = _reply(t0, ctl.lengths, error)
    got += [b""] * (len(SETUP) - len(got))
    out["version"], out["mtu"] = _text(got[0]), _text(got[3])
    out["cycle_buffer"] = SYS.unpack(got[1])[0] if got[1] else 0
    out["cache_line"] = SYS.unpack(got[2])[0] if got[2] else 0
    return out


def run(control: QPResources, data: QPResources, params: SendBwParams) -> SendBwReply:
    """Exchanges 6-11 on the control connection around the client's SENDs on the data
    connection, each credit written back after the receives perftest's server writes
    one (module doc)."""
    t0, wait, iters = now_us(), params.get("wait", 10.0), params.get("iters", 0)
    ctl = _Control(control, wait)
    assert data.mr is not None  # a QP of the CM layer always has its buffer
    slot = len(data.buf) - CREDIT.size  # this end's credit slot, which it advertises
    source = slot - CREDIT.size  # where its credits are written from
    qpn = ctypes.c_uint32.from_address(data.qp + QP_NUM_OFFSET).value
    base = ctypes.addressof(data.buf)
    own = pack_dest(qpn, random.getrandbits(24), data.mr.contents.rkey, base + slot)
    out = _reply(t0, ctl.lengths, None)
    try:
        for what in RUN:
            got = ctl.exchange(what, DEST.size, own if what != RUN[0] else bytes(DEST.size))
            if what == RUN[1]:
                out["dest"] = unpack_dest(got)
        dest = out["dest"]
        assert dest is not None
        qp = QP(data, wait, dest["rkey"])
        for n in range(1, iters + 1):
            out["received"].append(qp.received(f"ib_send_bw's SEND {n} of {iters}"))
            if credit_after(n, iters):
                CREDIT.pack_into(data.buf, source, n)
                qp.post(IBV_WR_RDMA_WRITE, CREDIT.size, source, dest["vaddr"])
                qp.sent(f"hil's credit {n}")
                out["credits"].append(n)
        ctl.exchange(CLOSE, DEST.size, own)
    except PayloadError as e:
        out["error"] = str(e)
    out["us"] = since(t0)["us"]
    return out


def check_iters(iters: int, depth: int) -> None:
    """Refuse (EINVAL) a run of more SENDs than this end keeps receives posted: past
    them perftest's client, which trusts its own window of ``rx_depth``, could SEND into
    an empty receive queue (no RNR on iWARP: the connection ends)."""
    if not 5 <= iters <= depth:
        raise RdmaError("send_bw", errno.EINVAL, f"iters must be 5..{depth}")
