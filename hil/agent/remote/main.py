"""The agent's main loop: handshake, JSON-lines requests, one thread per call.

Protocol (one JSON object per line, UTF-8):

- agent -> client, first line: ``{"agent": "hil", "protocol": N, "hash": ...,
  "pid": ..., "python": ..., "kernel": ..., "uid": ..., "methods": [...]}``
- client -> agent: ``{"id": 7, "method": "links", "params": {}, "timeout": 10}``
- agent -> client: ``{"id": 7, "result": ...}`` or
  ``{"id": 7, "error": {"type": KIND, "message": ..., "details": {...}}}``

Every message, and each method's params and result, is declared in
``hil/agent/protocol/``; ``METHODS`` here holds a function for each of its
methods.

The agent exits when its stdin closes (the SSH channel went away), after
killing every process it started.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import os
import platform
import signal
import sys
import threading
import traceback
from collections.abc import Callable
from typing import Any, BinaryIO, Union

from ..protocol import (
    AGENT_GRACE,
    PROTOCOL_VERSION,
    ErrorBody,
    ErrorReply,
    Handshake,
    ResultReply,
)
from . import clockpeer, ethtool, kmsg, netlink, probe, rdma, system
from .cm import close, methods
from .errors import OpError
from .peer import op as peer

_exiting = threading.Lock()  # held by the one caller of shutdown
# A Union, not ``|``: evaluated when the module loads (python 3.9).
Message = Union[Handshake, ResultReply, ErrorReply]  # noqa: UP007

# Each module's table is keyed by protocol.MethodName; together they serve
# every method of protocol.METHODS (tests/agent/test_protocol_spec.py).
METHODS: dict[str, Callable[..., object]] = {
    name: fn
    for table in (
        system.METHODS,
        netlink.METHODS,
        ethtool.METHODS,
        rdma.METHODS,
        kmsg.METHODS,
        methods.METHODS,
        probe.METHODS,
        clockpeer.METHODS,
        close.METHODS,
        peer.METHODS,
    )
    for name, fn in table.items()
}
DEFAULT_TIMEOUT = 30.0


def _self_hash() -> str:
    """sha256 of the zipapp we run from, so the client knows which build answers."""
    h = hashlib.sha256()
    with open(sys.argv[0], "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


class Server:
    """Reads requests, runs each in its own thread, writes one answer per id."""

    def __init__(self, out: BinaryIO) -> None:
        self._out = out
        self._write_lock = threading.Lock()

    def send(self, message: Message) -> None:
        """Write one JSON line; a vanished reader ends the agent."""
        line = json.dumps(message, separators=(",", ":"), default=str).encode() + b"\n"
        with self._write_lock:
            try:
                self._out.write(line)
                self._out.flush()
            except (BrokenPipeError, OSError):
                shutdown(0)

    def hello(self) -> None:
        """The handshake line, sent before anything else."""
        self.send(
            {
                "agent": "hil",
                "protocol": PROTOCOL_VERSION,
                "hash": _self_hash(),
                "pid": os.getpid(),
                "python": platform.python_version(),
                "kernel": platform.release(),
                "uid": os.getuid(),
                "methods": sorted(METHODS),
            }
        )

    def handle(self, line: bytes) -> None:
        """Parse one request and start its worker; malformed lines get an error."""
        try:
            req = json.loads(line)
            rid, method = req["id"], req["method"]
            params = req.get("params") or {}
            timeout = float(req.get("timeout") or DEFAULT_TIMEOUT)
        except (ValueError, KeyError, TypeError) as e:
            self.send({"id": None, "error": _error(OpError("bad_request", f"bad request: {e}"))})
            return
        reply = _Reply(self, rid)
        watchdog = threading.Timer(timeout + AGENT_GRACE, reply.overran, (method, timeout))
        watchdog.daemon = True
        watchdog.start()
        threading.Thread(
            target=self._work, args=(reply, watchdog, method, params, timeout), daemon=True
        ).start()

    def _work(
        self,
        reply: _Reply,
        watchdog: threading.Timer,
        method: str,
        params: dict[str, Any],
        timeout: float,
    ) -> None:
        try:
            reply.result(_call(method, params, timeout))
        except OpError as e:
            reply.error(e)
        except Exception as e:  # noqa: BLE001 -- an agent bug: keep serving, report it whole
            tb = "".join(traceback.format_exception(type(e), e, e.__traceback__)[-6:])
            reply.error(OpError("internal", f"{type(e).__name__}: {e}", traceback=tb))
        finally:
            watchdog.cancel()


class _Reply:
    """Answers one request exactly once: its result, its error, or its overrun."""

    def __init__(self, server: Server, rid: int) -> None:
        self._server = server
        self._rid = rid
        self._lock = threading.Lock()
        self._done = False

    def _first(self) -> bool:
        with self._lock:
            first, self._done = not self._done, True
        return first

    def result(self, value: object) -> None:
        if self._first():
            self._server.send({"id": self._rid, "result": value})

    def error(self, e: OpError) -> None:
        if self._first():
            self._server.send({"id": self._rid, "error": _error(e)})

    def overran(self, method: str, timeout: float) -> None:
        self.error(OpError("timeout", f"{method} did not finish within {timeout:g}s"))


def _error(e: OpError) -> ErrorBody:
    return {"type": e.kind, "message": e.message, "details": e.details}


def _call(method: str, params: dict[str, Any], timeout: float) -> object:
    fn = METHODS.get(method)
    if fn is None:
        raise OpError("unknown_method", f"no method {method!r}", known=sorted(METHODS))
    sig = inspect.signature(fn)
    if "timeout" in sig.parameters:
        params = {**params, "timeout": timeout}
    try:
        sig.bind(**params)
    except TypeError as e:
        raise OpError("bad_params", f"{method}: {e}", params=sorted(params)) from None
    return fn(**params)


def shutdown(status: int) -> None:
    """Kill our children, close our cursors, and exit without waiting for workers.

    Only the first caller shuts down; any later one returns at once.  A cut connection
    both closes stdin and has the SSH watcher send SIGTERM: the signal's handler runs in
    the main thread, possibly while that thread already holds the children's lock in
    ``kill_children``, and re-entering it there deadlocked the agent with its children
    still running.
    """
    if not _exiting.acquire(blocking=False):
        return
    system.kill_children()
    methods.close_all()
    peer.close_all()
    kmsg.close_all()
    sys.stderr.flush()
    os._exit(status)


def main() -> None:
    """Serve requests from stdin until it closes."""
    # The protocol owns fd 1; anything else printing (a library) goes to stderr.
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(sig, lambda *_: shutdown(1))
    server = Server(out)
    server.hello()
    threading.Thread(target=netlink.preload, daemon=True).start()
    for line in sys.stdin.buffer:
        if line.strip():
            server.handle(line)
    shutdown(0)
