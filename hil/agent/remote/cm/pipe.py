"""A CM endpoint worker process as the agent drives it: started, called over its pipe, ended.

The worker (``server.py``, from this same zipapp) answers one JSON line for
each request line; a reader thread hands each answer to the request waiting
for it, and keeps the tail of the worker's stderr for the error that tells
it died.  Workers are started from one long-lived thread (:class:`_Spawner`)
so that PR_SET_PDEATHSIG ties them to the agent, not to a request's thread.
"""

from __future__ import annotations

import collections
import json
import os
import queue
import signal
import subprocess
import sys
import threading
from typing import TYPE_CHECKING, Any

from ..errors import OpError
from ..hostclock import now_us

_BOOT = (
    "import sys; sys.path.insert(0, sys.argv[1]); "
    "from hil_agent.remote.cm.server import main; main()"
)
# Where the agent's own hil_agent package was imported from, for the workers' sys.path:
# the unpacked copy beside the zipapp (zipmain.py), whose bytecode Python caches, or the
# zip itself where no copy could be made.  From the zip (sys.argv[0]) every worker
# compiled every module it imports again: about 3x the start (0.13 s against 0.04 s
# here, over a second on a TCG guest), paid for each endpoint a test opens.
# This file is hil_agent/remote/cm/pipe.py there.
_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
if TYPE_CHECKING:
    # What the spawner thread hands back: the started worker, or why it could not start.
    _Started = subprocess.Popen[bytes] | OSError


class _Spawner:
    """Starts workers from one thread that lives as long as the agent.

    PR_SET_PDEATHSIG fires when the parent THREAD exits, and each agent
    request runs in a short-lived thread: a worker started there would be
    killed as soon as its cm_open returned.
    """

    def __init__(self) -> None:
        self._jobs: queue.Queue[tuple[list[str], queue.Queue[_Started]]] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def popen(self, argv: list[str]) -> subprocess.Popen[bytes]:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._serve, daemon=True)
                self._thread.start()
        done: queue.Queue[_Started] = queue.Queue()
        self._jobs.put((argv, done))
        started = done.get()
        if isinstance(started, OSError):
            raise started
        return started

    def _serve(self) -> None:
        while True:
            argv, done = self._jobs.get()
            try:
                done.put(
                    subprocess.Popen(
                        argv,
                        stdin=subprocess.PIPE,
                        stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE,
                        start_new_session=True,
                    )
                )
            except OSError as e:
                done.put(e)


_spawner = _Spawner()


class _Slot:
    """A request to a worker, waiting for its answer (None if the worker died)."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.answer: dict[str, Any] | None = None


class WorkerProcess:
    """One running worker process: its pipe, the answers it owes, the tail of its stderr."""

    def __init__(self, number: int) -> None:
        self.number = number
        argv = [sys.executable, "-I", "-c", _BOOT, _ROOT]
        self.proc = _spawner.popen(argv)
        self.pid = self.proc.pid
        self._pending: dict[int, _Slot] = {}
        self._lock = threading.Lock()
        self._next = 1
        self._hello: dict[str, Any] | None = None
        self._hello_ready = threading.Event()
        self._dead = threading.Event()
        self._stderr: collections.deque[str] = collections.deque(maxlen=20)
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._read_stderr, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
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
        self._dead.set()
        self._hello_ready.set()
        with self._lock:
            pending, self._pending = list(self._pending.values()), {}
        for slot in pending:
            slot.event.set()

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self._stderr.append(line.decode("utf-8", "replace").rstrip())

    def _gone(self, what: str) -> OpError:
        try:
            status = self.proc.wait(2)
        except subprocess.TimeoutExpired:
            status = None
        tail = " / ".join(list(self._stderr)[-3:])
        return OpError(
            "cm_worker_died",
            f"CM endpoint {self.number} (pid {self.pid}) {what} "
            f"(exit status {status}){': ' + tail if tail else ''}",
            endpoint=self.number,
            pid=self.pid,
            status=status,
        )

    def wait_hello(self, timeout: float) -> None:
        """Wait for the worker's hello; OpError when it failed or did not start."""
        if not self._hello_ready.wait(timeout):
            self.kill()
            raise OpError("timeout", f"CM endpoint worker did not start within {timeout:g}s")
        hello = self._hello
        if hello is None:
            raise self._gone("exited before it said hello")
        if "error" in hello:
            self.proc.wait(5)
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
            assert self.proc.stdin is not None
            self.proc.stdin.write(line)
            self.proc.stdin.flush()
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
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(10)
        return t_us

    def close(self, timeout: float) -> int | None:
        """Close its stdin (it destroys its ids and exits); SIGKILL at the timeout."""
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return None
