"""A CM endpoint worker process as the agent drives it: started, called over its pipe, ended.

The worker (``server.py``, from this same zipapp) is forked by the agent's
zygote (``spawn.py``, ``zygote.py``) with the three pipes made here as its
stdin, stdout and stderr.  It answers one JSON line for each request line; a
reader thread hands each answer to the request waiting for it, and keeps the
tail of the worker's stderr for the error that tells it died.  The worker is
not the agent's child: it is waited for and killed through a pidfd (which
names it and no later process with its pid), and its exit status is the one
the zygote reports when it reaps it.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import threading
import time
import weakref
from typing import Any

from ..errors import OpError
from ..hostclock import now_us
from . import spawn

KILL_WAIT_S = 10.0  # a SIGKILLed worker is gone by then, unless stuck in the kernel


class _Slot:
    """A request to a worker, waiting for its answer (None if the worker died)."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.answer: dict[str, Any] | None = None


class WorkerProcess:
    """One running worker process: its pipe, the answers it owes, the tail of its stderr."""

    def __init__(self, number: int) -> None:
        self.number = number
        self._started = time.monotonic()
        stdin_r, stdin_w = os.pipe()
        stdout_r, stdout_w = os.pipe()
        stderr_r, stderr_w = os.pipe()
        try:
            self._zygote, self.pid, self._pidfd = spawn.fork([stdin_r, stdout_w, stderr_w])
        except BaseException:
            for fd in (stdin_w, stdout_r, stderr_r):
                os.close(fd)
            raise
        finally:
            for fd in (stdin_r, stdout_w, stderr_w):
                os.close(fd)
        weakref.finalize(self, os.close, self._pidfd)
        self._stdin = os.fdopen(stdin_w, "wb")
        self._stdout = os.fdopen(stdout_r, "rb")
        self._stderr = spawn.StderrTail(os.fdopen(stderr_r, "rb"))
        self._pending: dict[int, _Slot] = {}
        self._lock = threading.Lock()
        self._next = 1
        self._hello: dict[str, Any] | None = None
        self._hello_ready = threading.Event()
        self._dead = threading.Event()
        self._exited = False
        self._status_lock = threading.Lock()  # not _lock: call() holds that in _gone()
        self._status: int | None = None
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        with self._stdout:
            self._read_answers()
        self._dead.set()
        self._hello_ready.set()
        with self._lock:
            pending, self._pending = list(self._pending.values()), {}
        for slot in pending:
            slot.event.set()

    def _read_answers(self) -> None:
        for line in self._stdout:
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            if self._hello is None:
                self._hello = msg
                self._hello_ready.set()
                continue
            with self._lock:
                slot = self._pending.pop(msg.get("id"), None)
            if slot is not None:
                slot.answer = msg
                slot.event.set()

    def wait(self, timeout: float) -> int | None:
        """Wait for the worker's exit; its status (negative: the signal that killed it), or
        None when the zygote did not report it.  TimeoutError if it still runs."""
        poll = select.poll()
        poll.register(self._pidfd, select.POLLIN)  # readable once the process exited
        if not poll.poll(max(0, int(timeout * 1000))):
            raise TimeoutError(f"CM endpoint {self.number} (pid {self.pid}) still runs")
        with self._status_lock:  # the zygote reports it once; several threads may ask
            if not self._exited:
                self._status = self._zygote.exit_status(self.pid)
                self._exited = True
            return self._status

    def _gone(self, what: str) -> OpError:
        try:
            status = self.wait(2)
        except TimeoutError:
            status = None
        return OpError(
            "cm_worker_died",
            f"CM endpoint {self.number} (pid {self.pid}) {what} "
            f"(exit status {status}){self._stderr.suffix()}",
            endpoint=self.number,
            pid=self.pid,
            status=status,
        )

    def wait_hello(self, timeout: float) -> None:
        """Wait for the worker's hello; OpError when it failed or did not start within
        ``timeout`` of its fork's request (the zygote's start included)."""
        if not self._hello_ready.wait(max(0.0, self._started + timeout - time.monotonic())):
            self.kill()
            raise OpError("timeout", f"CM endpoint worker did not start within {timeout:g}s")
        hello = self._hello
        if hello is None:
            raise self._gone("exited before it said hello")
        if "error" in hello:
            with contextlib.suppress(TimeoutError):
                self.wait(5)
            raise OpError(
                hello.get("kind", "rdma"), f"cannot open an RDMA CM channel: {hello['error']}"
            )

    def call(self, op: str, params: dict[str, Any], timeout: float) -> dict[str, Any]:
        """One operation in the worker, answered within ``timeout`` or OpError."""
        slot = _Slot()
        with self._lock:
            if self._dead.is_set():
                raise self._gone("is gone")
            rid = self._next
            self._next += 1
            self._pending[rid] = slot
        line = json.dumps({"id": rid, "op": op, "params": params}).encode() + b"\n"
        try:
            self._stdin.write(line)
            self._stdin.flush()
        except OSError:
            raise self._gone("is gone") from None
        if not slot.event.wait(timeout):
            with self._lock:
                self._pending.pop(rid, None)
            raise OpError(
                "timeout",
                f"cm {op} on endpoint {self.number} did not finish within "
                f"{timeout:g}s; the endpoint (pid {self.pid}) may still be blocked "
                "in it: kill it (cm_kill) or close it",
                op=op,
                endpoint=self.number,
            )
        answer = slot.answer
        if answer is None:
            raise self._gone(f"died during {op}")
        if "error" in answer:
            err = dict(answer["error"])
            kind, message = err.pop("type", "rdma"), err.pop("message", "")
            raise OpError(kind, f"cm {op}: {message}", **err)
        result: dict[str, Any] = answer["result"]  # the op's reply (protocol.CM_OPS[op])
        return result

    def kill(self) -> int:
        """SIGKILL the worker; returns the µs time it was sent."""
        t_us = now_us()
        with contextlib.suppress(ProcessLookupError):  # it exited already
            signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)
        try:
            self.wait(KILL_WAIT_S)
        except TimeoutError:
            raise OpError(
                "timeout",
                f"CM endpoint {self.number} (pid {self.pid}) still runs {KILL_WAIT_S:g}s "
                "after SIGKILL (stuck in the kernel?)",
                endpoint=self.number,
            ) from None
        return t_us

    def close(self, timeout: float) -> int | None:
        """Close its stdin (it destroys its ids and exits); SIGKILL at the timeout."""
        with contextlib.suppress(OSError):
            self._stdin.close()
        try:
            return self.wait(timeout)
        except TimeoutError:
            self.kill()
            return None
