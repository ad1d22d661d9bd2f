"""One CM endpoint in its own process: an event channel, driven over a pipe by the agent.

The agent starts one per endpoint (``cm.py``) so that SIGKILL of the process
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
its stdin closes, or with the agent (PR_SET_PDEATHSIG); the kernel releases
whatever it still held.
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any, BinaryIO

from . import cmscript, cmstorm
from .cmstream import Stream
from .librdmacm import CMChannel, RdmaError, RdmaUnavailable
from .librdmacm.verbsabi import wc_status_name
from .protocol import (
    CM_OP_NAMES,
    DESTROY_ORDERS,
    AcceptReply,
    AutoAnswer,
    CMActionEntry,
    CMEventEntry,
    CMEventType,
    CMLogEntry,
    CMOpName,
    ConnectReply,
    DestroyOrder,
    DestroyReply,
    EventsReply,
    HandlesReply,
    IdTimedReply,
    RemoteBuffer,
    ScenarioParams,
    ScenarioReply,
    ScenarioStep,
    StormParams,
    StormReply,
    StormRole,
    StreamMode,
    StreamStats,
    StreamStopReply,
    TimedReply,
    WriteReply,
)

QP_DEPTH = 16  # send and receive queue depth of every QP this worker makes
RESOLVE_MS = 2000
WRITE_POLL_S = 0.001  # between CQ polls while a single WRITE waits for its completion
PAUSE_WAIT_S = 5.0  # for the poller's read under way (0.1 s), or a storm's (it holds the lock)
_PR_SET_PDEATHSIG = 1


def now_us() -> int:
    """This host's CLOCK_MONOTONIC in µs (the time base of events and actions)."""
    return time.monotonic_ns() // 1000


class Log:
    """Events and the worker's own actions (auto accept/reject), in arrival order."""

    def __init__(self) -> None:
        self.entries: list[CMLogEntry] = []
        self.cond = threading.Condition()

    def add(self, entry: CMLogEntry) -> CMLogEntry:
        """Append ``entry``, numbering it (its ``seq``, 1 for the first)."""
        with self.cond:
            entry["seq"] = len(self.entries) + 1
            self.entries.append(entry)
            self.cond.notify_all()
        return entry

    def wait(
        self, after: int, types: list[CMEventType] | None, handle: int | None, timeout: float
    ) -> list[CMLogEntry]:
        """Entries after ``after``, once one matches (or at the timeout): any entry
        when neither ``types`` nor ``handle`` is given, else an event of ``types``
        (any if empty) for ``handle`` (any if None)."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                fresh = self.entries[after:]
                if any(_matches(e, types, handle) for e in fresh):
                    return fresh
                left = deadline - time.monotonic()
                if left <= 0:
                    return fresh
                self.cond.wait(left)


def _matches(entry: CMLogEntry, types: list[CMEventType] | None, handle: int | None) -> bool:
    if not types and handle is None:
        return True
    return (
        entry["kind"] == "event"
        and (not types or entry["type"] in types)
        and (handle is None or entry["id"] == handle)
    )


class Worker:
    """The channel, its log, the auto-answering listeners and the traffic streams."""

    def __init__(self, channel: CMChannel) -> None:
        self.ch = channel
        self.log = Log()
        self.auto: dict[int, tuple[AutoAnswer, bytes]] = {}
        self.streams: dict[int, Stream] = {}
        self.paused = threading.Event()
        # Held while the poller reads the channel: a storm's serving sets paused, takes it
        # and reads the channel itself (no hand-over between threads per event).
        self.reading = threading.Lock()
        self.closing = threading.Event()

    # -- the poller ----------------------------------------------------------

    def poll_loop(self) -> None:
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
                with self.reading:
                    ev = None if self.paused.is_set() else self.ch.poll_event(0.1)
            except RdmaError as e:
                self.log.add({"kind": "error", "seq": 0, "message": str(e), "t_us": now_us()})
                time.sleep(0.1)
                continue
            if ev is None:
                continue
            event: CMEventEntry = {"kind": "event", "seq": 0, **ev}
            self.log.add(event)
            listen = ev["listen_id"]
            rule = self.auto.get(listen) if isinstance(listen, int) else None
            if ev["type"] != "CONNECT_REQUEST":
                rule = None
            if rule is not None and ev["id"] is not None:
                threading.Thread(
                    target=self._auto_answer, args=(ev["id"], *rule), daemon=True
                ).start()

    def _auto_answer(self, handle: int, how: AutoAnswer, pdata: bytes) -> None:
        entry: CMActionEntry = {
            "kind": "action",
            "seq": 0,
            "name": how,
            "id": handle,
            "params": {"private_data": pdata.hex(), "auto": True},
            "result": "ok",
            "t_us": 0,
            "us": 0,
        }
        try:
            if how == "accept":
                accepted = self.accept(id=handle, private_data=pdata.hex())
                entry["qp"] = accepted["qp"]
                done: TimedReply = accepted
            else:
                done = self.reject(id=handle, private_data=pdata.hex())
            entry["t_us"], entry["us"] = done["t_us"], done["us"]
        except RdmaError as e:
            entry["result"] = errno.errorcode.get(e.errno or 0, str(e.errno))
            entry["t_us"] = now_us()
        self.log.add(entry)

    def _wait_event(
        self, handle: int, types: list[CMEventType], after: int, timeout: float
    ) -> CMEventEntry:
        """The first event of ``types`` for ``handle`` logged after entry ``after``."""
        for e in self.log.wait(after, types, handle, timeout):
            if e["kind"] == "event" and _matches(e, types, handle):
                return e
        raise RdmaError(
            f"wait {'/'.join(types)}",
            errno.ETIMEDOUT,
            f"cm_id {handle}: no event within {timeout:g}s",
        )

    # -- operations (each returns a dict; RdmaError is the failure) -----------

    def listen(
        self,
        address: str,
        port: int,
        backlog: int = 16,
        auto: AutoAnswer | None = None,
        private_data: str = "",
    ) -> IdTimedReply:
        """A listener bound to ``address:port``; ``auto`` = accept/reject answers requests."""
        if auto not in (None, "accept", "reject"):
            raise RdmaError("listen", errno.EINVAL, f"auto must be accept or reject, not {auto!r}")
        h = self.ch.create_id()
        try:
            self.ch.bind(h, address, port)
            t0 = now_us()
            self.ch.listen(h, backlog)
        except RdmaError:
            self.ch.destroy_id(h)
            raise
        if auto:
            self.auto[h] = (auto, bytes.fromhex(private_data))
        return {"id": h, "t_us": t0, "us": now_us() - t0}

    def connect(
        self,
        dst: str,
        port: int,
        src: str | None = None,
        private_data: str = "",
        resolve_timeout: float = 10.0,
    ) -> ConnectReply:
        """Resolve address and route, make a QP, rdma_connect; the reply comes as an event."""
        h = self.ch.create_id()
        try:
            mark = len(self.log.entries)
            self.ch.resolve_addr(h, dst, port, src, RESOLVE_MS)
            ev = self._wait_event(h, ["ADDR_RESOLVED", "ADDR_ERROR"], mark, resolve_timeout)
            if ev["type"] != "ADDR_RESOLVED":
                raise RdmaError("rdma_resolve_addr", -ev["status"] or errno.EHOSTUNREACH)
            mark = len(self.log.entries)
            self.ch.resolve_route(h, RESOLVE_MS)
            ev = self._wait_event(h, ["ROUTE_RESOLVED", "ROUTE_ERROR"], mark, resolve_timeout)
            if ev["type"] != "ROUTE_RESOLVED":
                raise RdmaError("rdma_resolve_route", -ev["status"] or errno.EHOSTUNREACH)
            qp = self.ch.create_qp(h, depth=QP_DEPTH)
            self.ch.post_recv(h, QP_DEPTH)
        except RdmaError as e:
            e.handle = h  # type: ignore[attr-defined]
            raise
        t0 = now_us()
        try:
            self.ch.connect(h, bytes.fromhex(private_data))
        except RdmaError as e:
            e.handle, e.t_us, e.us = h, t0, now_us() - t0  # type: ignore[attr-defined]
            raise
        return {"id": h, "t_us": t0, "us": now_us() - t0, "qp": qp}

    def accept(self, id: int, private_data: str = "") -> AcceptReply:
        """Make a QP for a CONNECT_REQUEST's id, post receives, rdma_accept."""
        qp = self.ch.create_qp(id, depth=QP_DEPTH)
        self.ch.post_recv(id, QP_DEPTH)
        return {**self._timed(self.ch.accept, id, bytes.fromhex(private_data)), "qp": qp}

    def reject(self, id: int, private_data: str = "") -> TimedReply:
        """rdma_reject with private data."""
        return self._timed(self.ch.reject, id, bytes.fromhex(private_data))

    def disconnect(self, id: int) -> TimedReply:
        """rdma_disconnect (orderly close)."""
        return self._timed(self.ch.disconnect, id)

    def qp_err(self, id: int) -> TimedReply:
        """Move the QP to ERR (abortive close)."""
        return self._timed(self.ch.qp_to_error, id)

    def destroy(self, id: int, order: DestroyOrder = "qp_first") -> DestroyReply:
        """Stop the id's stream, destroy its QP and the id; ``us`` is how long destroy blocked.

        ``order``: ``qp_first`` (as rdma_cm applications do: ``us`` covers
        both), or ``id_first``: rdma_destroy_id while the QP still exists,
        ``us`` the id's destroy alone and ``qp_us`` the QP's after it.
        ``t_us + us`` must not come before rdma_destroy_id returned: the
        contract compares every event of the id against it.  So both ends
        are read here, around the call (the channel's own timing starts
        later, and a thread preempted in between made that sum up to
        milliseconds early on a loaded guest: docs/cm-engine.md).
        """
        if order not in DESTROY_ORDERS:
            raise RdmaError("destroy", errno.EINVAL, f"order must be one of {DESTROY_ORDERS}")
        stream = self.streams.pop(id, None)
        if stream is not None:
            stream.stop()
        self.auto.pop(id, None)
        if order == "qp_first":
            done = self._timed(self.ch.destroy_id, id)
            return {"t_us": done["t_us"], "us": done["us"]}
        t0 = now_us()
        try:
            returned = self.ch.destroy_id_first(id)
        except RdmaError as e:
            e.t_us, e.us = t0, now_us() - t0  # type: ignore[attr-defined]
            raise
        return {"t_us": t0, "us": returned - t0, "qp_us": now_us() - returned}

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
        if id in self.streams:
            raise RdmaError("write", errno.EBUSY, f"cm_id {id} streams: its CQ is the stream's")
        t0 = now_us()
        deadline = time.monotonic() + wait
        try:
            wr_id = self.ch.post_send(id, length, (int(remote["addr"]), int(remote["rkey"])))
            while time.monotonic() < deadline:
                # Other completions (receives flushed once the QP is in error) are not asked for.
                for wc in self.ch.poll_cq(id):
                    if wc["wr_id"] == wr_id:
                        return {
                            "t_us": t0,
                            "us": now_us() - t0,
                            "wr_id": wr_id,
                            "wc_status": wc["status"],
                            "wc_status_name": wc_status_name(wc["status"]),
                            "vendor_err": wc["vendor_err"],
                        }
                time.sleep(WRITE_POLL_S)
            raise RdmaError("write", errno.ETIMEDOUT, f"cm_id {id}: no completion within {wait:g}s")
        except RdmaError as e:
            e.t_us, e.us = t0, now_us() - t0  # type: ignore[attr-defined]
            raise

    def events(
        self,
        after: int = 0,
        wait: float = 0.0,
        types: list[CMEventType] | None = None,
        id: int | None = None,
    ) -> EventsReply:
        """Log entries after ``after``, waiting up to ``wait`` s for a matching event."""
        return {"log": self.log.wait(after, types, id, wait), "t_us": now_us()}

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

    def scenario(
        self,
        steps: list[ScenarioStep],
        after: int = 0,
        start_us: int = 0,
        linger_s: float = 0.0,
        deadline_s: float = cmscript.DEFAULT_DEADLINE_S,
    ) -> ScenarioReply:
        """Run a script of steps here, each at its trigger (cmscript.py); the whole log."""
        params: ScenarioParams = {
            "steps": steps,
            "after": after,
            "linger_s": linger_s,
            "deadline_s": deadline_s,
        }
        if start_us:
            params["start_us"] = start_us
        return cmscript.run(self, params)

    def storm(
        self,
        role: StormRole,
        count: int,
        dst: str = "",
        port: int = 0,
        src: str = "",
        parallel: int = 1,
        traffic: int = 0,
        tag: str = "hil-storm-",
        listen_id: int = 0,
        hold_s: float = 0.0,
        idle_s: float = cmstorm.DEFAULT_IDLE_S,
        start_us: int = 0,
        wait_s: float = cmstorm.DEFAULT_WAIT_S,
        deadline_s: float = cmstorm.DEFAULT_DEADLINE_S,
        after: int = 0,
    ) -> StormReply:
        """Run one role of a connection storm here (cmstorm.py): every step, stamped."""
        params: StormParams = {
            "role": role,
            "count": count,
            "parallel": parallel,
            "traffic": traffic,
            "tag": tag,
            "hold_s": hold_s,
            "idle_s": idle_s,
            "start_us": start_us,
            "wait_s": wait_s,
            "deadline_s": deadline_s,
            "after": after,
        }
        if role == "connect":
            params["dst"], params["port"] = dst, port
            if src:
                params["src"] = src
        else:
            params["listen_id"] = listen_id
        return cmstorm.run(self, params)

    def handles(self) -> HandlesReply:
        """The live cm_id handles."""
        return {"ids": self.ch.handles()}

    def close(self) -> None:
        """Stop every stream, destroy every id and the channel."""
        for stream in list(self.streams.values()):
            stream.stop()
        self.streams.clear()
        self.ch.close()

    def _timed(self, fn: Callable[..., object], *args: object) -> TimedReply:
        t0 = now_us()
        try:
            fn(*args)
        except RdmaError as e:
            e.t_us, e.us = t0, now_us() - t0  # type: ignore[attr-defined]
            raise
        return {"t_us": t0, "us": now_us() - t0}


# The operations a request may name: Worker's methods of these names (protocol.CM_OPS).
OPS: tuple[CMOpName, ...] = CM_OP_NAMES


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
        except (TypeError, cmscript.ScenarioError, cmstorm.StormError) as e:
            self.send({"id": rid, "error": {"type": "bad_params", "message": f"{op}: {e}"}})
        except Exception as e:  # noqa: BLE001 -- a worker bug: report it, keep serving
            tb = "".join(traceback.format_exception(type(e), e, e.__traceback__)[-6:])
            self.send(
                {"id": rid, "error": {"type": "internal", "message": f"{e!r}", "traceback": tb}}
            )


def _die_with_parent() -> None:
    """SIGKILL us when the agent dies, even by SIGKILL (Linux prctl)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass
    if os.getppid() == 1:
        os._exit(1)


def main() -> None:
    """Open the channel, say hello, serve requests until stdin closes."""
    _die_with_parent()
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
    poller = threading.Thread(target=worker.poll_loop, daemon=True)
    poller.start()
    server.send({"pid": os.getpid()})
    for line in sys.stdin.buffer:
        if line.strip():
            server.handle(line)
    worker.closing.set()
    poller.join(2)
    # Destroying every id may block (an id in CONN_SENT); the kernel frees
    # whatever is left when we exit, so bound the orderly part.
    closer = threading.Thread(target=worker.close, daemon=True)
    closer.start()
    closer.join(15)
    os._exit(0)
