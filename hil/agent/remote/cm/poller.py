"""A CM worker's poller: the thread that reads the channel all the time, and its pause.

Every event is stamped (host CLOCK_MONOTONIC, µs) when it arrives and
appended to the worker's log; a CONNECT_REQUEST to a listener with an answer
rule (``auto``) is handed to the worker's answer in a thread of its own.  A
pause stops the reading, so requests stay unretrieved in the kernel; a storm
pauses it and reads the channel itself while it holds :attr:`Poller.reading`.
"""

from __future__ import annotations

import errno
import threading
import time
from collections.abc import Callable

from ...protocol import AutoAnswer, TimedReply
from ..hostclock import now_us
from ..librdmacm import CMChannel, RdmaError
from .log import Log

PAUSE_WAIT_S = 5.0  # for the poller's read under way (0.1 s), or a storm's (it holds the lock)

# How the worker answers a request on an auto listener: (new id, accept/reject, private data).
Answer = Callable[[int, AutoAnswer, bytes], None]


class Poller:
    """Reads ``channel`` into ``log`` until :attr:`closing`; answers auto listeners' requests."""

    def __init__(self, channel: CMChannel, log: Log, answer: Answer) -> None:
        self.ch = channel
        self.log = log
        self._answer = answer
        self.auto: dict[int, tuple[AutoAnswer, bytes]] = {}  # listener -> how, private data
        self.paused = threading.Event()
        # Held while the poller reads the channel: a storm's serving sets paused, takes it
        # and reads the channel itself (no hand-over between threads per event).
        self.reading = threading.Lock()
        self.closing = threading.Event()

    def run(self) -> None:
        """Read events until closing; stamp, log, and auto-answer them."""
        while not self.closing.is_set():
            if self.paused.is_set():
                # A storm reading the channel holds `reading`: wait on it, not awake every
                # 10 ms taking the GIL from the storm's thread.
                if self.reading.acquire(timeout=1.0):
                    self.reading.release()
                    time.sleep(0.01)
                continue
            try:
                # Logged before the lock goes: a pause returns with every event it let
                # the poller retrieve already in the log.
                with self.reading:
                    ev = None if self.paused.is_set() else self.ch.poll_event(0.1)
                    if ev is not None:
                        self.log.add({"kind": "event", "seq": 0, **ev})
            except RdmaError as e:
                self.log.add({"kind": "error", "seq": 0, "message": str(e), "t_us": now_us()})
                time.sleep(0.1)
                continue
            if ev is None:
                continue
            listen = ev["listen_id"]
            rule = self.auto.get(listen) if isinstance(listen, int) else None
            if ev["type"] != "CONNECT_REQUEST":
                rule = None
            if rule is not None and ev["id"] is not None:
                threading.Thread(target=self._answer, args=(ev["id"], *rule), daemon=True).start()

    def pause(self, on: bool = True) -> TimedReply:
        """Stop (or resume) reading events: requests then stay unretrieved in the kernel.

        A pause returns once the poller's read under way (up to its 0.1 s poll) has
        ended: an event that came during that read would otherwise be retrieved
        after the pause, and a request retrieved gives rdma_ucm its backlog slot back.
        """
        if not on:
            self.paused.clear()
            return {"t_us": now_us(), "us": 0}
        self.paused.set()
        if not self.reading.acquire(timeout=PAUSE_WAIT_S):
            raise RdmaError(
                "pause", errno.EBUSY, f"the channel is still being read after {PAUSE_WAIT_S} s"
            )
        self.reading.release()
        return {"t_us": now_us(), "us": 0}
