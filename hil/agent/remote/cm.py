"""Agent CM operations: one worker process per CM endpoint, driven over a pipe.

``cm_open`` starts a worker (``cmworker.py``, from this same zipapp) that
owns one RDMA CM event channel; ``cm_call(endpoint, op, params)`` runs one of
its operations (listen, connect, accept, reject, disconnect, qp_err, destroy,
stream_start/stop/stats, events, pause, handles, and ``scenario``: a script of
those run in the worker at its triggers); ``cm_kill`` SIGKILLs it, the
way a crashing application would drop its connections; ``cm_close`` ends it
in order.  ``cm_now`` is this host's CLOCK_MONOTONIC in µs, the time base of
every event and action the workers report (for the controller's clock offset);
``clock_pair`` reads CLOCK_REALTIME between two reads of it, so that times on
the wall clock (a capture's packets) can be put on that base.

No call blocks the agent: each request already runs in its own agent thread,
and here waits for the worker's answer at most ``timeout``; a worker stuck in
a foreign call (destroy in CONN_SENT) stays stuck alone.  When the agent
exits, :func:`close_all` kills every worker, and a worker also dies with the
agent by PR_SET_PDEATHSIG; the kernel then releases every cm_id and QP.
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
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .errors import OpError, held
from .protocol import (
    ClockPairReply,
    ClockReply,
    CloseReply,
    CMOpName,
    EndpointReply,
    KillReply,
    MethodName,
)

# A worker's start (python + librdmacm) gets the call's bound less this: kill() waits up
# to 10 s for a worker that did not start, and the answer must beat the call's bound.
START_MARGIN = 10.0
CLOCK_PAIR_TRIES = 5  # clock_pair keeps the tightest of these (a preempted try is wide)
_BOOT = "import sys; sys.path.insert(0, sys.argv[1]); from hil_agent.cmserver import main; main()"
# Where the agent's own hil_agent package was imported from, for the workers' sys.path:
# the unpacked copy beside the zipapp (zipmain.py), whose bytecode Python caches, or the
# zip itself where no copy could be made.  From the zip (sys.argv[0]) every worker
# compiled every module it imports again: about 3x the start (0.13 s against 0.04 s
# here, over a second on a TCG guest), paid for each endpoint a test opens.
_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if TYPE_CHECKING:
    # What the spawner thread hands back: the started worker, or why it could not start.
    _Started = subprocess.Popen[bytes] | OSError


def now_us() -> int:
    """This host's CLOCK_MONOTONIC in µs."""
    return time.monotonic_ns() // 1000


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
    """One running cmworker: its pipe, the answers it owes, the tail of its stderr."""

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


_workers: dict[int, WorkerProcess] = {}
_lock = threading.Lock()
_numbers = iter(range(1, 1 << 30))


def _worker(endpoint: int) -> WorkerProcess:
    return held(_workers, _lock, endpoint, f"no CM endpoint {endpoint} (open one with cm_open)")


def cm_now() -> ClockReply:
    """This host's CLOCK_MONOTONIC in µs."""
    return {"t_us": now_us()}


def clock_pair() -> ClockPairReply:
    """CLOCK_REALTIME and CLOCK_MONOTONIC at one instant (µs), to +/- ``spread_us``.

    Reads monotonic, wall, monotonic; the wall reading lies between the two
    monotonic ones, so it belongs to their midpoint within half their
    difference.  Of a few tries the tightest wins.
    """
    best: ClockPairReply | None = None
    for _ in range(CLOCK_PAIR_TRIES):
        before = time.monotonic_ns()
        wall = time.time_ns()
        after = time.monotonic_ns()
        spread = -(-(after - before) // 2000)  # half the window, µs, rounded up
        if best is None or spread < best["spread_us"]:
            best = {
                "mono_us": (before + after) // 2000,
                "wall_us": wall // 1000,
                "spread_us": spread,
            }
    assert best is not None
    return best


def start_bound(timeout: float) -> float:
    """How long a worker may take to say hello within a cm_open bounded by ``timeout``:
    all of it but :data:`START_MARGIN` (a debug kernel's TCG guest took over 20 s)."""
    return max(timeout - START_MARGIN, timeout / 2)


def cm_open(timeout: float) -> EndpointReply:
    """Start a CM endpoint worker with its own event channel; its number and pid."""
    with _lock:
        number = next(_numbers)
    try:
        w = WorkerProcess(number)
    except OSError as e:
        raise OpError("os", f"cannot start a CM endpoint worker: {e.strerror}") from None
    with _lock:
        _workers[number] = w
    try:
        w.wait_hello(start_bound(timeout))
    except OpError:
        with _lock:
            _workers.pop(number, None)
        raise
    return {"endpoint": number, "pid": w.pid}


def cm_call(
    endpoint: int, op: CMOpName, timeout: float, params: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Run ``op`` in endpoint ``endpoint`` (see cmworker.OPS), bounded by ``timeout``."""
    return _worker(endpoint).call(op, params or {}, timeout)


def cm_kill(endpoint: int) -> KillReply:
    """SIGKILL endpoint ``endpoint``'s process, as a crash would; when it was sent."""
    w = _worker(endpoint)
    with _lock:
        _workers.pop(endpoint, None)
    return {"t_us": w.kill(), "pid": w.pid}


def cm_close(endpoint: int, timeout: float) -> CloseReply:
    """End endpoint ``endpoint`` in order (ids destroyed), killing it at the timeout."""
    w = _worker(endpoint)
    with _lock:
        _workers.pop(endpoint, None)
    status = w.close(max(0.1, timeout - 0.5))
    return {"status": status, "killed": status is None}


def cm_endpoints() -> list[EndpointReply]:
    """The endpoints alive: number and pid."""
    with _lock:
        return [{"endpoint": n, "pid": w.pid} for n, w in sorted(_workers.items())]


def close_all() -> None:
    """Kill every worker (the agent is exiting)."""
    with _lock:
        workers = list(_workers.values())
        _workers.clear()
    for w in workers:
        try:
            os.kill(w.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


METHODS: dict[MethodName, Callable[..., object]] = {
    "cm_now": cm_now,
    "clock_pair": clock_pair,
    "cm_open": cm_open,
    "cm_call": cm_call,
    "cm_kill": cm_kill,
    "cm_close": cm_close,
    "cm_endpoints": cm_endpoints,
}
