"""rdma-core's rping protocol played by one CM endpoint (``cm_call`` op ``rping``), so that
rping on the other host has a peer (hil/cm/toolpeers.py).

Read in rdma-core's ``librdmacm/examples/rping.c`` (rping_test_client,
rping_test_server, rping_format_send, client_recv, server_recv). Each ping goes:

1. the client fills its start buffer with ping ``k``'s text and SENDs a
   ``struct rping_rdma_info`` (``__be64 buf``, ``__be32 rkey``, ``__be32 size``:
   16 bytes; a receive of another length is "bogus data" to rping) advertising it;
2. the server RDMA READs that buffer and SENDs a go-ahead (its 16-byte send
   buffer, which it never fills);
3. the client advertises its sink (rdma) buffer the same way;
4. the server RDMA WRITEs what it read into the sink and SENDs a go-ahead;
5. the client, with ``-V``, compares the sink with the start buffer.

The client ends by disconnecting; the server reads pings until then.  Here every
receive lands at the buffer's start (:func:`payload.received`), so the
advertisements and go-aheads use bytes 0-63, the start (or read) buffer begins
at :data:`START` and a client's sink follows it.
"""

from __future__ import annotations

import ctypes
import errno
import struct

from ...protocol import RpingCheck, RpingParams, RpingReply
from ..hostclock import now_us, since
from ..librdmacm import RdmaError
from ..librdmacm.ibverbs import QPResources
from ..librdmacm.verbsabi import IBV_WR_RDMA_READ, IBV_WR_RDMA_WRITE, IBV_WR_SEND
from .payload import QP, PayloadError

INFO = struct.Struct(">QII")  # struct rping_rdma_info: buf, rkey, size, big-endian
INFO_AT = 32  # where this end builds the 16 bytes it SENDs (past a receive's 16)
START = 4096  # the start buffer (a client's) or the read buffer (a server's)


def text(ping: int, size: int) -> bytes:
    """Ping ``ping``'s start buffer as rping's client fills it: ``"rdma-ping-%d: "``,
    then letters from ``'A' + ping`` on, each next one up to ``'z'`` and round to
    ``'A'``, the last byte NUL (rping.c rping_test_client)."""
    head = f"rdma-ping-{ping}: ".encode()[: size - 1]
    letters, c = bytearray(), 65 + ping % 58
    for _ in range(size - len(head)):
        letters.append(c)
        c = 65 if c >= 122 else c + 1
    return (head + bytes(letters))[: size - 1] + b"\0"


def largest(res: QPResources) -> int:
    """The largest ping a client here may send: the start and sink both past :data:`START`."""
    return (len(res.buf) - START) // 2


class _Rping:
    """One end's part: its QP, and the posts and waits each step takes."""

    def __init__(self, res: QPResources, wait: float) -> None:
        assert res.mr is not None  # a QP of the CM layer always has its buffer
        self.qp = QP(res, wait, 0)
        self.addr, self.rkey = self.qp.addr, res.mr.contents.rkey

    def post(self, opcode: int, length: int, offset: int, target: tuple[int, int] | None) -> None:
        try:
            self.qp.res.post(opcode, length, offset, target)
        except RdmaError as e:
            raise PayloadError(str(e)) from None
        self.qp.sent(f"rping's {length}-byte work request")

    def send_info(self, offset: int, size: int) -> None:
        """SEND the advertisement of this end's buffer at ``offset``, ``size`` bytes."""
        ctypes.memmove(self.addr + INFO_AT, INFO.pack(self.addr + offset, self.rkey, size), 16)
        self.post(IBV_WR_SEND, INFO.size, INFO_AT, None)

    def go_ahead(self) -> None:
        """SEND the server's 16 bytes that say "go on" (rping's server sends them unfilled)."""
        ctypes.memset(self.addr + INFO_AT, 0, INFO.size)
        self.post(IBV_WR_SEND, INFO.size, INFO_AT, None)

    def receive(self, what: str) -> bytes:
        """The next 16-byte receive (rping refuses any other length as bogus)."""
        length = self.qp.received(what)
        if length != INFO.size:
            raise PayloadError(f"{what}: a receive of {length} bytes, not rping's {INFO.size}")
        return ctypes.string_at(self.addr, INFO.size)


def run(res: QPResources, params: RpingParams) -> RpingReply:
    """Play ``role`` for ``count`` pings (module doc); what each ping checked."""
    t0, count = now_us(), params["count"]
    end = _Rping(res, params.get("wait", 10.0))
    checks: list[RpingCheck] = []
    texts: list[str] = []
    play = _client_ping if params["role"] == "client" else _server_ping
    size = params.get("size", 0)
    if params["role"] == "client" and not 0 < size <= largest(res):
        raise RdmaError("rping", errno.EINVAL, f"size must be 1..{largest(res)}")
    error = None
    try:
        for ping in range(count):
            check, shown = play(end, ping, size)
            checks.append(check)
            texts.append(shown)
    except PayloadError as e:
        error = str(e)
    return {**since(t0), "checks": checks, "text": texts, "error": error}


def _client_ping(end: _Rping, ping: int, size: int) -> tuple[RpingCheck, str]:
    """One ping as rping's client: the start advertised and read, the sink advertised and
    written, then rping -V's comparison of the sink with the start."""
    start, sink = end.addr + START, end.addr + START + size
    ctypes.memmove(start, text(ping, size), size)
    ctypes.memset(sink, 0, size)  # a sink left from the last ping must not pass for this one
    end.send_info(START, size)
    end.receive(f"ping {ping}: the go-ahead after the read")
    end.send_info(START + size, size)
    # The peer's RDMA WRITE into the sink is placed before its later SEND is delivered
    # (RFC 5040 section 5.5), so the sink is whole once this go-ahead arrives.
    end.receive(f"ping {ping}: the go-ahead after the write")
    got = ctypes.string_at(sink, size)
    return _check(ping, ctypes.string_at(start, size), got), _shown(got)


def _server_ping(end: _Rping, ping: int, _size: int) -> tuple[RpingCheck, str]:
    """One ping as rping's server: read the advertised start, go ahead, write what was
    read into the advertised sink, go ahead; the read checked against ping's text."""
    addr, rkey, size = INFO.unpack(end.receive(f"ping {ping}: the start advertisement"))
    if not 0 < size <= len(end.qp.res.buf) - START:
        raise PayloadError(f"ping {ping}: rping advertised {size} bytes, past this buffer")
    end.post(IBV_WR_RDMA_READ, size, START, (addr, rkey))
    got = ctypes.string_at(end.addr + START, size)
    end.go_ahead()
    addr, rkey, sink_size = INFO.unpack(end.receive(f"ping {ping}: the sink advertisement"))
    end.post(IBV_WR_RDMA_WRITE, min(size, sink_size), START, (addr, rkey))
    end.go_ahead()
    return _check(ping, text(ping, size), got), _shown(got)


def _check(ping: int, want: bytes, got: bytes) -> RpingCheck:
    """Ping ``ping``'s check: ``got`` against ``want`` (equal lengths), its first bad byte."""
    bad = next((i for i, (a, b) in enumerate(zip(want, got, strict=True)) if a != b), -1)
    return {"ping": ping, "size": len(got), "ok": bad < 0, "offset": bad}


def _shown(data: bytes) -> str:
    """A ping's text as rping prints it (``%s``: up to its NUL)."""
    return data.split(b"\0", 1)[0].decode("ascii", "replace")
