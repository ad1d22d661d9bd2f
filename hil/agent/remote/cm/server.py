"""One CM endpoint in its own process: an event channel, driven over a pipe by the agent.

The agent forks one per endpoint from its zygote (``zygote.py``) so that SIGKILL of the process
holding a connection is real, and so that a foreign call that blocks (destroy
in CONN_SENT, siw's connect) blocks only this process's request thread.

Protocol on stdin/stdout, one JSON object a line: first the worker's hello
``{"pid": N}`` (or ``{"error": ..., "kind": ...}`` and exit), then for each
request ``{"id": 1, "op": "connect", "params": {...}}`` exactly one answer
``{"id": 1, "result": {...}}`` or ``{"id": 1, "error": {...}}``.  Each request
runs in its own thread.

A poller thread reads the channel all the time, so every event is stamped
(host CLOCK_MONOTONIC, µs) when it arrives, and appends it to the log; a
listener may answer its requests itself (``auto``).  The worker exits when
its stdin closes, or with the zygote, which dies with the agent (PR_SET_PDEATHSIG,
set by the zygote in the child before it calls :func:`main`); the kernel releases
whatever it still held.
"""

from __future__ import annotations

import errno
import json
import os
import sys
import threading
import traceback
from typing import Any, BinaryIO

from ..librdmacm import CMChannel, RdmaError, RdmaUnavailable
from . import script, storm
from .worker import OPS, Worker


class Server:
    """Requests from stdin, one thread each; answers to stdout under a lock."""

    def __init__(self, worker: Worker | None, out: BinaryIO) -> None:
        self.worker = worker
        self._out = out
        self._lock = threading.Lock()

    def send(self, msg: dict[str, Any]) -> None:
        line = json.dumps(msg, separators=(",", ":")).encode() + b"\n"
        with self._lock:
            try:
                self._out.write(line)
                self._out.flush()
            except OSError:
                os._exit(1)  # the agent is gone

    def handle(self, line: bytes) -> None:
        try:
            req = json.loads(line)
            rid, op, params = req["id"], req["op"], req.get("params") or {}
        except (ValueError, KeyError, TypeError) as e:
            self.send({"id": None, "error": {"type": "bad_request", "message": str(e)}})
            return
        threading.Thread(target=self._run, args=(rid, op, params), daemon=True).start()

    def _run(self, rid: object, op: str, params: dict[str, Any]) -> None:
        if op not in OPS:
            self.send({"id": rid, "error": {"type": "unknown_method", "message": f"no op {op}"}})
            return
        try:
            self.send({"id": rid, "result": getattr(self.worker, op)(**params)})
        except RdmaError as e:
            details = {k: getattr(e, k) for k in ("handle", "t_us", "us") if hasattr(e, k)}
            self.send(
                {
                    "id": rid,
                    "error": {
                        "type": "rdma",
                        "message": str(e),
                        "errno": e.errno,
                        "errno_name": errno.errorcode.get(e.errno or 0, str(e.errno)),
                        **details,
                    },
                }
            )
        except (TypeError, script.ScenarioError, storm.StormError) as e:
            self.send({"id": rid, "error": {"type": "bad_params", "message": f"{op}: {e}"}})
        except Exception as e:  # noqa: BLE001 -- a worker bug: report it, keep serving
            tb = "".join(traceback.format_exception(type(e), e, e.__traceback__)[-6:])
            self.send(
                {"id": rid, "error": {"type": "internal", "message": f"{e!r}", "traceback": tb}}
            )


def main() -> None:
    """Open the channel, say hello, serve requests until stdin closes."""
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    server = Server(None, out)
    try:
        channel = CMChannel()
    except RdmaError as e:
        kind = "rdma_unavailable" if isinstance(e, RdmaUnavailable) else "rdma"
        server.send({"error": str(e), "kind": kind})
        os._exit(3)
    server.worker = worker = Worker(channel)
    poller = threading.Thread(target=worker.poller.run, daemon=True)
    poller.start()
    server.send({"pid": os.getpid()})
    for line in sys.stdin.buffer:
        if line.strip():
            server.handle(line)
    worker.poller.closing.set()
    poller.join(2)
    # Destroying every id may block (an id in CONN_SENT); the kernel frees
    # whatever is left when we exit, so bound the orderly part.
    closer = threading.Thread(target=worker.close, daemon=True)
    closer.start()
    closer.join(15)
    os._exit(0)
