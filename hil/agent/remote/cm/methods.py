"""Agent CM operations: one worker process per CM endpoint, driven over a pipe.

``cm_open`` starts a worker (``server.py``, from this same zipapp; driven
through ``pipe.py``) that owns one RDMA CM event channel;
``cm_call(endpoint, op, params)`` runs one of its operations (listen,
connect, accept, reject, disconnect, qp_err, destroy,
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

import os
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

from ...protocol import (
    ClockPairReply,
    ClockReply,
    CloseReply,
    CMOpName,
    EndpointReply,
    KillReply,
    MethodName,
)
from ..errors import OpError, held
from ..hostclock import now_us
from .pipe import WorkerProcess

# A worker's start (python + librdmacm) gets the call's bound less this: kill() waits up
# to 10 s for a worker that did not start, and the answer must beat the call's bound.
START_MARGIN = 10.0
CLOCK_PAIR_TRIES = 5  # clock_pair keeps the tightest of these (a preempted try is wide)


_workers: dict[int, WorkerProcess] = {}
_lock = threading.Lock()
_numbers = iter(range(1, 1 << 30))


def _worker(endpoint: int) -> WorkerProcess:
    return held(_workers, _lock, endpoint, f"no CM endpoint {endpoint} (open one with cm_open)")


def _take(endpoint: int) -> WorkerProcess:
    """Endpoint ``endpoint``'s worker, out of the table: it is being ended."""
    w = _worker(endpoint)
    with _lock:
        _workers.pop(endpoint, None)
    return w


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
    """Run ``op`` in endpoint ``endpoint`` (see worker.OPS), bounded by ``timeout``."""
    return _worker(endpoint).call(op, params or {}, timeout)


def cm_kill(endpoint: int) -> KillReply:
    """SIGKILL endpoint ``endpoint``'s process, as a crash would; when it was sent."""
    w = _take(endpoint)
    return {"t_us": w.kill(), "pid": w.pid}


def cm_close(endpoint: int, timeout: float) -> CloseReply:
    """End endpoint ``endpoint`` in order (ids destroyed), killing it at the timeout."""
    w = _take(endpoint)
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
