"""Traffic on one connection: SENDs or RDMA WRITEs kept in flight, or a receive sink.

Keeps data in flight so a link pull meets a connection with unacknowledged
data (that is what makes TCP, and siw with it, notice a dead link).  A
``sink`` reposts a receive for every completed one, so a peer's SENDs always
find a buffer (iWARP has no RNR retry: a SEND with no receive kills the
connection).
:class:`StreamOps` are the CM worker's operations on them (and a single WRITE).
"""

from __future__ import annotations

import errno
import threading
import time

from ...protocol import (
    STREAM_MODES,
    CMOpName,
    RemoteBuffer,
    StreamMode,
    StreamStats,
    StreamStopReply,
    TimedReply,
    WriteReply,
)
from ..hostclock import now_us, since, stamp
from ..librdmacm import CMChannel, RdmaError
from ..librdmacm.verbsabi import wc_status_name

MODES = STREAM_MODES
QP_DEPTH = 16  # send and receive queue depth of every QP a CM worker makes
WRITE_POLL_S = 0.001  # between CQ polls while a single WRITE waits for its completion
IDLE_SLEEP_S = 0.0005  # between CQ polls when nothing completed: bounds CPU use on TCG guests
# How long a stop waits for the work still in flight: a dead link's QP flushes it at
# once, a live one completes it within a round trip, or a retransmission's backoff
# after a flap.
DRAIN_S = 3.0


class Stream:
    """A thread posting work requests on one cm_id's QP until :meth:`stop`."""

    def __init__(
        self,
        ch: CMChannel,
        handle: int,
        mode: StreamMode,
        size: int,
        depth: int,
        remote: tuple[int, int] | None,
    ) -> None:
        if mode not in MODES:
            raise RdmaError("stream_start", errno.EINVAL, f"mode must be one of {MODES}")
        if mode == "write" and remote is None:
            raise RdmaError(
                "stream_start",
                errno.EINVAL,
                "an RDMA WRITE stream needs the peer's buffer (remote addr, rkey)",
            )
        self._ch, self._h, self._mode = ch, handle, mode
        self._size, self._depth, self._remote = size, max(1, depth), remote
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._ops = self._bytes = 0
        self._error: str | None = None
        self._error_t_us: int | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        """Start posting."""
        self._thread.start()

    def stop(self, timeout: float = 2.0 + DRAIN_S) -> StreamStats:
        """Stop posting, take what was still in flight, and return the counts."""
        self._stop.set()
        self._thread.join(timeout)
        return self.stats()

    def stats(self) -> StreamStats:
        """Completed ops and bytes, and the first error (a failed post or completion)."""
        with self._lock:
            return {
                "mode": self._mode,
                "ops": self._ops,
                "bytes": self._bytes,
                "error": self._error,
                "error_t_us": self._error_t_us,
            }

    def _fail(self, what: str) -> None:
        with self._lock:
            if self._error is None:
                self._error, self._error_t_us = what, time.monotonic_ns() // 1000

    def _run(self) -> None:
        inflight = 0
        while not self._stop.is_set():
            try:
                if self._mode != "sink" and self._error is None:
                    while inflight < self._depth:
                        self._ch.post_send(self._h, self._size, self._remote)
                        inflight += 1
                done = self._ch.poll_cq(self._h)
            except RdmaError as e:
                self._fail(str(e))
                return  # the QP or the id is gone: nothing more to post or poll
            for wc in done:
                self._complete(wc)
                if self._mode == "sink":
                    self._repost()
                else:
                    inflight -= 1
            if not done:
                time.sleep(IDLE_SLEEP_S)
        self._drain(inflight)

    def _drain(self, inflight: int) -> None:
        """Take the completions of the work still in flight at the stop, so that what
        runs on the QP next (a payload check, which counts its own completions and
        whose buffer an unsent WRITE would still read) starts on a quiet CQ.  A flushed
        completion here is the stop's, not the stream's error."""
        deadline = time.monotonic() + DRAIN_S
        while self._mode != "sink" and inflight > 0 and time.monotonic() < deadline:
            try:
                done = self._ch.poll_cq(self._h)
            except RdmaError:
                return
            inflight -= len(done)
            if not done:
                time.sleep(IDLE_SLEEP_S)

    def _complete(self, wc: dict[str, int]) -> None:
        if wc["status"] != 0:
            self._fail(f"completion status {wc['status']} (wr {wc['wr_id']})")
            return
        with self._lock:
            self._ops += 1
            self._bytes += wc["byte_len"] if self._mode == "sink" else self._size

    def _repost(self) -> None:
        try:
            self._ch.post_recv(self._h, 1)
        except RdmaError as e:
            self._fail(str(e))


class StreamOps:
    """A CM worker's traffic operations: streams kept per cm_id, and a single WRITE."""

    ch: CMChannel
    streams: dict[int, Stream]

    def stream_start(
        self,
        id: int,
        mode: StreamMode = "write",
        size: int = 4096,
        depth: int = 4,
        remote: RemoteBuffer | None = None,
    ) -> TimedReply:
        """Keep ``depth`` SENDs or RDMA WRITEs of ``size`` in flight (``sink``: repost recvs)."""
        if id in self.streams:
            raise RdmaError("stream_start", errno.EBUSY, f"cm_id {id} already streams")
        target = (int(remote["addr"]), int(remote["rkey"])) if remote else None
        stream = Stream(self.ch, id, mode, size, min(depth, QP_DEPTH), target)
        self.streams[id] = stream
        stream.start()
        return {"t_us": now_us(), "us": 0}

    def stream_stop(self, id: int) -> StreamStopReply:
        """Stop the stream; its counts (ops, bytes, first error)."""
        stream = self.streams.pop(id, None)
        if stream is None:
            raise RdmaError("stream_stop", errno.ENOENT, f"cm_id {id} has no stream")
        return {"t_us": now_us(), "us": 0, **stream.stop()}

    def stream_stats(self, id: int) -> StreamStats:
        """The running stream's counts so far."""
        stream = self.streams.get(id)
        if stream is None:
            raise RdmaError("stream_stats", errno.ENOENT, f"cm_id {id} has no stream")
        return stream.stats()

    def write(
        self, id: int, remote: RemoteBuffer, length: int = 64, wait: float = 10.0
    ) -> WriteReply:
        """Post one signaled RDMA WRITE of ``length`` bytes to ``remote``; its completion.

        The completion's status is the answer, error or not: a WRITE the peer
        refuses (wrong rkey, out of bounds) is what a sequence provokes.  No
        completion within ``wait`` seconds is ETIMEDOUT.
        """
        self._cq_free("write", id)
        t0 = now_us()
        deadline = time.monotonic() + wait
        try:
            wr_id = self.ch.post_send(id, length, (int(remote["addr"]), int(remote["rkey"])))
            while time.monotonic() < deadline:
                # Other completions (receives flushed once the QP is in error) are not asked for.
                for wc in self.ch.poll_cq(id):
                    if wc["wr_id"] == wr_id:
                        return {
                            **since(t0),
                            "wr_id": wr_id,
                            "wc_status": wc["status"],
                            "wc_status_name": wc_status_name(wc["status"]),
                            "vendor_err": wc["vendor_err"],
                        }
                time.sleep(WRITE_POLL_S)
            raise RdmaError("write", errno.ETIMEDOUT, f"cm_id {id}: no completion within {wait:g}s")
        except RdmaError as e:
            stamp(e, t0)
            raise

    def _cq_free(self, op: CMOpName, id: int) -> None:
        """Refuse (EBUSY) an op that polls the id's CQ itself while a stream polls it:
        each would take the other's completions."""
        if id in self.streams:
            raise RdmaError(op, errno.EBUSY, f"cm_id {id} streams: its CQ is the stream's")
