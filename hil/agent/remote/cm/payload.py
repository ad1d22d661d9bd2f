"""A connection's payload checked byte for byte, against a pattern both ends compute.

Both ends of one connection run :func:`run` at once (the controller calls both
workers together), each on its cm_id's QP and its one registered buffer, with
the other end's buffer (addr, rkey, length) as its connect or accept reply
gave it.  Nothing of the pattern crosses the wire but the data itself: byte
``i`` of step ``k``'s message is :func:`pattern`'s byte ``i`` for seed + k, so
data left over from an earlier step never passes for the current one.

Sizes: 1 byte, the route's MTU - 1 and + 1, and the largest message here.
The MTU is the link's as the route toward the peer holds it (``IP_MTU``,
ip(7)), the smaller of the two ends' (swapped first, as 4-byte SENDs): the
size an application sets and sees; a DDP segment carries less (the TCP, MPA
and DDP/RDMAP headers come off it), so MTU - 1 already takes two segments
on a 1500-byte link and MTU + 1 crosses the link MTU itself.  The largest is
the smaller of the two ends' buffers (64 KiB): every receive is posted on the
whole buffer, so a longer SEND finds no room; the devices allow more (siw's
``max_msg_sz`` is 2^32 - 1, siw_verbs.c ``siw_query_port``, 6.1).

Every receive lands at the buffer's offset 0, so a step's data must be
checked before the next lands there: each step ends with a zero-length SEND
from the end that checked, which the other end waits for before it goes on.
For each op, each size, the first end acting first, then the other:

- ``send``: the actor fills its buffer and SENDs it; the peer checks the
  receive's length and bytes;
- ``write``: the actor fills its buffer, RDMA WRITEs it into the peer's, then
  SENDs zero bytes; when that SEND completes at the peer the WRITE is placed
  there (RFC 5040 section 5.5: an RDMA Write's data is placed before a later
  Send on the same stream is delivered), and the peer checks its buffer;
- ``read``: the peer fills its buffer and SENDs zero bytes; the actor RDMA
  READs the peer's buffer into its own and checks it.

:func:`reads` is the ``read`` step with ``count`` READs posted at once, each of
its own slice of the buffers: a connection's RDMA READs within (and past) its
negotiated ORD (docs/ird-ord.md).
"""

from __future__ import annotations

import ctypes
import errno
import socket
import struct
import time
from collections.abc import Callable

from ...protocol import (
    PAYLOAD_OPS,
    FlushedParams,
    FlushedReply,
    FlushedWC,
    LastReceivesParams,
    LastReceivesReply,
    LastSendsParams,
    LastSendsReply,
    LastWC,
    MessagesParams,
    MessagesReply,
    PayloadCheck,
    PayloadOpName,
    PayloadParams,
    PayloadReply,
    QPInfo,
    ReadsParams,
    ReadsReply,
    ReceivedParams,
    ReceivedReply,
)
from ..hostclock import now_us, since
from ..librdmacm import RdmaError
from ..librdmacm.ibverbs import QPResources
from ..librdmacm.verbsabi import (
    IBV_WC_RECV,
    IBV_WR_RDMA_READ,
    IBV_WR_RDMA_WRITE,
    IBV_WR_SEND,
    wc_status_name,
)

SPAN = 1 << 16  # the pattern's period: no byte of a 64 KiB buffer repeats another's place
IP_MTU, IPV6_MTU = 14, 24  # linux/in.h, linux/in6.h (python's socket module may lack them)
POLL_S = 0.0002  # between CQ polls while a step waits
# How long a drain goes on polling once every posted work request has completed: a
# second completion of one would come with the flush (siw_qp.c siw_rq_flush and
# siw_sq_flush complete every queued entry in one pass, 6.1.192).
QUIET_S = 0.05
LAST_SLICE = 256  # the SENDs before a close: SEND i of count is (count - i) * 256 bytes
LATE_S = 0.2  # how long the receiving end waits for a SEND late past its DISCONNECTED
_BASE = bytes((i + (i >> 8) * 31) & 0xFF for i in range(SPAN))


class PayloadError(Exception):
    """A step that could not run: a failed post, an error completion, a timeout."""


def pattern(seed: int, length: int) -> bytes:
    """``length`` bytes of the pattern: byte ``i`` is ``(i + (i >> 8) * 31 + seed) & 0xff``.

    Period 64 KiB: a byte moved by any distance short of that, or a segment
    placed at another offset, differs from what belongs there."""
    if not 0 <= length <= SPAN:
        raise ValueError(f"a pattern is 0..{SPAN} bytes, not {length}")
    shift = bytes((j + seed) & 0xFF for j in range(256))
    return _BASE[:length].translate(shift)


def first_difference(want: bytes, got: bytes) -> tuple[int, int, int]:
    """The first offset where ``got`` differs from ``want`` and both bytes there (-1: the
    shorter has none), or (-1, -1, -1) when they are equal."""
    if want == got:
        return -1, -1, -1
    common = min(len(want), len(got))
    i = next((i for i in range(common) if want[i] != got[i]), common)  # zip's strict is 3.10
    return i, want[i] if i < len(want) else -1, got[i] if i < len(got) else -1


def route_mtu(address: str) -> int:
    """The MTU of the route toward ``address``: ``IP_MTU`` (ip(7)) or ``IPV6_MTU``
    (ipv6(7)) of a UDP socket connected there (nothing is sent)."""
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    level, opt = (socket.IPPROTO_IPV6, IPV6_MTU) if ":" in address else (socket.IPPROTO_IP, IP_MTU)
    try:
        with socket.socket(family, socket.SOCK_DGRAM) as s:
            s.connect((address, 9))
            return int(s.getsockopt(level, opt))
    except OSError as e:
        raise PayloadError(f"no route MTU toward {address!r}: {e.strerror or e}") from None


def sizes(mtu: int, largest: int) -> list[int]:
    """1, ``mtu`` - 1, ``mtu`` + 1 and ``largest``: those that fit in ``largest``."""
    return sorted({n for n in (1, mtu - 1, mtu + 1, largest) if 1 <= n <= largest})


class QP:
    """One end's QP seen as the steps need it: posts, and completions waited for."""

    def __init__(self, res: QPResources, wait_s: float, peer_rkey: int) -> None:
        self.res, self.wait_s, self.peer_rkey = res, wait_s, peer_rkey
        self.addr = ctypes.addressof(res.buf)
        self._sent = 0  # send-queue completions not yet waited for
        self._received: list[int] = []  # byte_len of receives not yet waited for

    def post(self, opcode: int, length: int, offset: int = 0, remote: int | None = None) -> None:
        """One signaled work request; ``remote``: an address in the peer's buffer."""
        target = None if remote is None else (remote, self.peer_rkey)
        try:
            self.res.post(opcode, length, offset, target)
        except RdmaError as e:
            raise PayloadError(str(e)) from None

    def sent(self, what: str, count: int = 1) -> None:
        """Wait for ``count`` send-queue completions."""
        self._until(lambda: self._sent >= count, what)
        self._sent -= count

    def received(self, what: str) -> int:
        """Wait for the next receive; its length (a receive is reposted at once)."""
        self._until(lambda: bool(self._received), what)
        return self._received.pop(0)

    def _until(self, done: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + self.wait_s
        while not done():
            if time.monotonic() > deadline:
                raise PayloadError(f"no completion within {self.wait_s:g}s waiting for {what}")
            if not self._take_one(what):
                time.sleep(POLL_S)

    def _take_one(self, what: str) -> bool:
        """Take one completion if one is ready; whether one was.  One at a time, so that
        a wait ends at the completion it waited for: a peer that closes as soon as it
        has this end's last SEND flushes the receives still posted here, and those
        errors, queued right behind the SEND's success, belong to whatever waits next."""
        try:
            wcs = self.res.poll(1)
            if not wcs:
                return False
            wc = wcs[0]
            if wc["status"] != 0:  # only wr_id and status are valid then (ibv_poll_cq(3))
                name = wc_status_name(wc["status"])
                raise PayloadError(f"completion {name} (wr {wc['wr_id']}) during {what}")
            if wc["opcode"] & IBV_WC_RECV:
                self._received.append(wc["byte_len"])
                self.res.post_recv(1)  # as many receives posted after as before
            else:
                self._sent += 1
        except RdmaError as e:
            raise PayloadError(str(e)) from None
        return True


class Run:
    """One end's part of the payload check (:func:`run`)."""

    def __init__(self, res: QPResources, params: PayloadParams) -> None:
        self.peer: QPInfo = params["peer"]
        self.qp = QP(res, params.get("wait", 10.0), self.peer["rkey"])
        self.first = params["first"]
        self.seed = params.get("seed", 0)
        self.own_mtu, self.peer_address = params.get("mtu", 0), params["peer_address"]
        self.largest = min(len(res.buf), self.peer["length"])
        self.checks: list[PayloadCheck] = []

    def swap_mtu(self) -> int:
        """Send this end's MTU, receive the peer's; the smaller.  Sent from the buffer's
        end, as the peer's lands at its start."""
        own = self.own_mtu or route_mtu(self.peer_address)
        end = len(self.qp.res.buf) - 4
        struct.pack_into("!I", self.qp.res.buf, end, own)
        self.qp.post(IBV_WR_SEND, 4, end)
        self.qp.sent("the MTU sent")
        got = self.qp.received("the peer's MTU")
        if got != 4:
            raise PayloadError(f"the peer's MTU came as {got} bytes, not 4")
        return min(own, int(struct.unpack_from("!I", self.qp.res.buf, 0)[0]))

    def steps(self, mtu: int) -> list[tuple[PayloadOpName, int, bool]]:
        """Every step: op, size, and whether this end acts (both ends list the same)."""
        return [
            (op, size, actor == self.first)
            for op in PAYLOAD_OPS
            for size in sizes(mtu, self.largest)
            for actor in (True, False)
        ]

    def step(self, k: int, op: PayloadOpName, size: int, acting: bool) -> None:
        """Step ``k``: this end's part of it (the module's doc)."""
        seed, what = self.seed + k, f"{op} of {size} bytes (step {k})"
        if op == "read" and acting:
            self.qp.received(f"the peer's buffer ready for the {what}")
            self.qp.post(IBV_WR_RDMA_READ, size, 0, self.peer["addr"])
            self.qp.sent(what)
            self._check(op, size, seed, size)
            self._done(what)
        elif op == "read":
            self._fill(seed, size)
            self.qp.post(IBV_WR_SEND, 0)
            self.qp.sent(f"the ready notice of the {what}")
            self.qp.received(f"the end of the {what}")
        elif acting:
            self._fill(seed, size)
            if op == "write":
                self.qp.post(IBV_WR_RDMA_WRITE, size, 0, self.peer["addr"])
            self.qp.post(IBV_WR_SEND, size if op == "send" else 0)
            self.qp.sent(what, 2 if op == "write" else 1)
            self.qp.received(f"the end of the {what}")
        else:
            got = self.qp.received(what)
            self._check(op, size, seed, got if op == "send" else size)
            self._done(what)

    def _fill(self, seed: int, size: int) -> None:
        ctypes.memmove(self.qp.addr, pattern(seed, size), size)

    def _check(self, op: PayloadOpName, size: int, seed: int, length: int) -> None:
        got = ctypes.string_at(self.qp.addr, min(length, len(self.qp.res.buf)))
        self.checks.append(checked(op, size, pattern(seed, size), got))

    def _done(self, what: str) -> None:
        self.qp.post(IBV_WR_SEND, 0)
        self.qp.sent(f"the end of the {what}")


def run(res: QPResources, params: PayloadParams) -> PayloadReply:
    """This end's part of the payload check: what it checked, the agreed MTU and
    sizes, and the error that stopped it (the peer then stops at its wait)."""
    t0 = now_us()
    check = Run(res, params)
    mtu, error = 0, None
    try:
        mtu = check.swap_mtu()
        for k, (op, size, acting) in enumerate(check.steps(mtu)):
            check.step(k, op, size, acting)
    except PayloadError as e:
        error = str(e)
    return {
        **since(t0),
        "mtu": mtu,
        "sizes": sizes(mtu, check.largest) if mtu else [],
        "checks": check.checks,
        "error": error,
    }


def reads(res: QPResources, params: ReadsParams) -> ReadsReply:
    """This end's part of ``count`` concurrent RDMA READs (the module's doc): the other
    end fills its buffer and says so; the reader posts every READ, each of an equal slice
    of the buffer at its own offset, waits for them all and checks each slice."""
    t0, count = now_us(), params["count"]
    qp = QP(res, params.get("wait", 10.0), params["peer"]["rkey"])
    size = min(len(res.buf), params["peer"]["length"]) // max(count, 1)
    want = pattern(params.get("seed", 0), size * count)
    checks: list[PayloadCheck] = []
    error = None
    try:
        if count and params["reader"]:
            qp.received("the peer's buffer ready for the READs")
            for k in range(count):
                qp.post(IBV_WR_RDMA_READ, size, k * size, params["peer"]["addr"] + k * size)
            qp.sent(f"{count} concurrent READs of {size} bytes", count)
            got = ctypes.string_at(qp.addr, size * count)
            checks = [_slice_check(want, got, k, size) for k in range(count)]
            qp.post(IBV_WR_SEND, 0)
            qp.sent("the end of the READs")
        elif count:
            ctypes.memmove(qp.addr, want, len(want))
            qp.post(IBV_WR_SEND, 0)
            qp.sent("the ready notice of the READs")
            qp.received("the end of the READs")
    except PayloadError as e:
        error = str(e)
    return {
        **since(t0),
        "count": count,
        "size": size,
        "checks": checks,
        "error": error,
    }


def _slice_check(want: bytes, got: bytes, k: int, size: int) -> PayloadCheck:
    """The check of READ ``k``: its slice of ``got`` against the pattern's."""
    part = slice(k * size, (k + 1) * size)
    return checked("read", size, want[part], got[part])


def flushed(res: QPResources, params: FlushedParams) -> FlushedReply:
    """Drain the CQ of a QP moved to ERR: every completion it gives until each work
    request posted and not yet completed has one, and for :data:`QUIET_S` after (a
    double completion is kept, not merged); ``wait`` bounds the whole drain."""
    t0, wait = now_us(), params.get("wait", 10.0)
    posted = sorted(res.outstanding)
    completions: list[FlushedWC] = []
    error, deadline, quiet_at = None, time.monotonic() + wait, None
    try:
        while quiet_at is None or time.monotonic() < quiet_at:
            completions += [{"wr_id": w["wr_id"], "status": w["status"]} for w in res.poll(16)]
            if quiet_at is None and set(posted) <= {c["wr_id"] for c in completions}:
                quiet_at = time.monotonic() + QUIET_S
            elif quiet_at is None and time.monotonic() > deadline:
                error = f"no completion within {wait:g}s for every posted work request"
                break
            time.sleep(POLL_S)
    except RdmaError as e:
        error = str(e)
    return {
        **since(t0),
        "posted": posted,
        "completions": completions,
        "error": error,
    }


def last_lengths(count: int) -> list[int]:
    """The lengths of the ``count`` SENDs before a close, longest first: each lands at
    the receive buffer's offset 0, so SEND i's last ``LAST_SLICE`` bytes outlive
    the later, shorter ones and every SEND's bytes stay checkable, in order."""
    return [(count - i) * LAST_SLICE for i in range(count)]


def last_sends(res: QPResources, params: LastSendsParams) -> LastSendsReply:
    """Post the ``count`` SENDs (:func:`last_lengths`; SEND i carries the pattern of
    seed + i), each from its own stretch of the buffer, and wait for their completions:
    rdma_disconnect(3) flushes work requests still posted, so only SENDs completed
    before the close are owed to the peer."""
    t0, seed, count = now_us(), params.get("seed", 0), params["count"]
    qp = QP(res, params.get("wait", 10.0), 0)
    lengths, offset, error = last_lengths(count), 0, None
    try:
        for i, n in enumerate(lengths):
            ctypes.memmove(qp.addr + offset, pattern(seed + i, n), n)
            qp.post(IBV_WR_SEND, n, offset)
            offset += n
        qp.sent(f"the {count} SENDs before the close", count)
    except PayloadError as e:
        error = str(e)
    return {**since(t0), "lengths": lengths, "error": error}


def last_receives(
    res: QPResources, params: LastReceivesParams, disconnected: Callable[[], int | None]
) -> LastReceivesReply:
    """The receiving end of :func:`last_sends`: poll the CQ, each completion stamped
    with the start of its poll, until the first ``count`` have come and this end's
    DISCONNECTED (``disconnected()``: its host time once the poller has read it) is
    seen, or for :data:`LATE_S` past it; then check every SEND's surviving bytes."""
    t0, count, seed = now_us(), params["count"], params.get("seed", 0)
    lengths, wait = last_lengths(count), params.get("wait", 10.0)
    got: list[LastWC] = []
    event_us, seen_us, error = 0, 0, None
    deadline = time.monotonic() + wait
    try:
        while not (seen_us and (len(got) >= count or now_us() - seen_us > LATE_S * 1e6)):
            if time.monotonic() > deadline:
                error = f"within {wait:g}s: {len(got)} of {count} SENDs, DISCONNECTED " + (
                    "seen" if event_us else "not seen"
                )
                break
            event_us = event_us or (disconnected() or 0)
            start = now_us()
            wcs = res.poll(16)
            seen_us = seen_us or (start if event_us else 0)
            got += [
                {"status": w["status"], "byte_len": w["byte_len"], "poll_us": start}
                for w in wcs
                if w["status"] or w["opcode"] & IBV_WC_RECV
            ]
            time.sleep(POLL_S)
    except RdmaError as e:
        error = str(e)
    return {
        **since(t0),
        "lengths": lengths,
        "completions": got[:count],
        "event_us": event_us,
        "seen_us": seen_us,
        "checks": _last_checks(res, seed, lengths),
        "error": error,
    }


def _last_checks(res: QPResources, seed: int, lengths: list[int]) -> list[PayloadCheck]:
    """Each SEND's bytes that no later one overwrote: SEND i's from the next one's
    length to its own."""
    buf = ctypes.string_at(ctypes.addressof(res.buf), lengths[0] if lengths else 0)
    lows = [*lengths[1:], 0]  # each SEND's bytes past the next one's (zip's strict is 3.10)
    return [
        checked("send", n, pattern(seed + i, n)[lows[i] :], buf[lows[i] : n], lows[i])
        for i, n in enumerate(lengths)
    ]


def checked(op: PayloadOpName, size: int, want: bytes, got: bytes, base: int = 0) -> PayloadCheck:
    """The check of a message of ``size`` bytes: ``got`` against ``want``, which start at
    the message's offset ``base`` (its first bad byte's offset is the message's)."""
    offset, expected, value = first_difference(want, got)
    return {
        "op": op,
        "size": size,
        "ok": offset < 0,
        "offset": offset + base if offset >= 0 else -1,
        "expected": expected,
        "got": value,
    }


RECEIVED_SHOWN = 256  # bytes of a received message the reply carries


def received(res: QPResources, params: ReceivedParams) -> ReceivedReply:
    """The next receive completion within ``wait`` and the bytes it delivered (each
    receive is of the whole buffer, from offset 0), checked against the pattern when the
    params give the ``size`` sent; one receive posted in its place."""
    t0, deadline = now_us(), time.monotonic() + params.get("wait", 10.0)
    status, length, error = -1, 0, None
    try:
        while status < 0 and time.monotonic() < deadline:
            for wc in res.poll(1):
                if wc["status"] or wc["opcode"] & IBV_WC_RECV:
                    status, length = wc["status"], wc["byte_len"] if not wc["status"] else 0
            time.sleep(POLL_S)
        if status == 0:
            res.post_recv(1)
    except RdmaError as e:
        error = str(e)
    got = ctypes.string_at(ctypes.addressof(res.buf), length)
    size = params.get("size", 0)
    want = pattern(params.get("seed", 0), size) if size and status == 0 else None
    return {
        **since(t0),
        "status": status,
        "byte_len": length,
        "data": got[:RECEIVED_SHOWN].hex(),
        "error": error if status >= 0 else error or "no receive completion in time",
        "checks": [] if want is None else [checked("send", len(want), want, got)],
    }


def messages(res: QPResources, params: MessagesParams) -> MessagesReply:
    """ucmatose's data exchange served by this end (``protocol.MessagesReply``): ``count``
    SENDs of ``size`` bytes posted at once from the buffer's start and waited for, before
    or after the peer's ``count`` SENDs are taken, each receive's length kept in order.
    A receive lands at the buffer's start too; nothing checks the bytes this end sent
    (ucmatose sends and receives an uninitialised buffer, cmatose.c create_message)."""
    t0, count, size = now_us(), params["count"], params["size"]
    if not 0 < size <= len(res.buf):  # the SENDs are filled in place: never past the buffer
        raise RdmaError("messages", errno.EINVAL, f"size must be 1..{len(res.buf)}")
    qp = QP(res, params.get("wait", 10.0), 0)
    got: list[int] = []
    sent, error = 0, None
    try:
        for turn in ("send", "receive") if params["send_first"] else ("receive", "send"):
            if turn == "receive":
                got.extend(qp.received(f"receive {i + 1} of {count}") for i in range(count))
                continue
            ctypes.memmove(qp.addr, pattern(params.get("seed", 0), size), size)
            for _ in range(count):
                qp.post(IBV_WR_SEND, size)
            qp.sent(f"the {count} SENDs", count)
            sent = count
    except PayloadError as e:
        error = str(e)
    return {**since(t0), "received": got, "sent": sent, "error": error}
