"""Traffic on one connection: SENDs or RDMA WRITEs kept in flight, or a receive sink.

Keeps data in flight so a link pull meets a connection with unacknowledged
data (that is what makes TCP, and siw with it, notice a dead link).  A
``sink`` reposts a receive for every completed one, so a peer's SENDs always
find a buffer (iWARP has no RNR retry: a SEND with no receive kills the
connection).
"""

from __future__ import annotations

import errno
import threading
import time

from .librdmacm import CMChannel, RdmaError
from .protocol import STREAM_MODES, StreamMode, StreamStats

MODES = STREAM_MODES
IDLE_SLEEP_S = 0.0005  # between CQ polls when nothing completed: bounds CPU use on TCG guests


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

    def stop(self, timeout: float = 2.0) -> StreamStats:
        """Stop posting and return the counts."""
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
