"""A stream's stop takes the completions of the WRITEs still in flight, so the next user
of the QP (a payload check) finds a quiet CQ (the channel faked at its boundary)."""

from __future__ import annotations

import threading
import time

from hil.agent.remote.cm.stream import Stream


class SlowChannel:
    """Each posted WRITE completes 20 ms after it was posted."""

    def __init__(self) -> None:
        self.posted: list[float] = []
        self.lock = threading.Lock()
        self.polled = 0

    def post_send(self, handle: int, size: int, remote: object) -> int:
        with self.lock:
            self.posted.append(time.monotonic() + 0.02)
            return len(self.posted)

    def poll_cq(self, handle: int) -> list[dict[str, int]]:
        now = time.monotonic()
        with self.lock:
            ready = [t for t in self.posted if t <= now]
            self.posted = [t for t in self.posted if t > now]
            self.polled += len(ready)
        return [{"status": 0, "wr_id": 0, "byte_len": 0, "opcode": 0} for _ in ready]

    def left(self) -> int:
        with self.lock:
            return len(self.posted)


def test_the_stop_waits_out_the_writes_in_flight() -> None:
    ch = SlowChannel()
    stream = Stream(ch, 1, "write", 64, 4, (0x1000, 7))  # type: ignore[arg-type]
    stream.start()
    # Stopped once a first round of WRITEs completed and the next is in flight (a fixed
    # 0.1 s did not always let the stream's thread get that far on a loaded machine).
    deadline = time.monotonic() + 5
    while not (stream.stats()["ops"] >= 4 and ch.left()) and time.monotonic() < deadline:
        time.sleep(0.005)
    stats = stream.stop()
    assert ch.left() == 0  # nothing left on the CQ for the next user
    assert stats["error"] is None and stats["ops"] >= 4, stats
