"""A connection storm run inside a CM worker: N connections at the speed of ctypes calls.

The controller sends one request (``protocol.StormParams``, ``cm_call`` op
``storm``) and gets one answer (``protocol.StormReply``).  Two roles:

- ``connect``: ``count`` connections to ``dst:port``, step by step for all of
  them as rdma-core's ``cmtime`` does (create ids; resolve every address;
  every route; a QP each; connect, ``parallel`` threads issuing
  ``rdma_connect`` because siw's blocks for a TCP handshake; optionally
  ``traffic`` SENDs each; disconnect all; destroy all).  Each connection's
  private data is ``tag`` + its index (4 digits), which ties it to the
  passive side's CONNECT_REQUEST.
- ``serve``: answer the requests of listener ``listen_id`` (made before with
  op ``listen``) in this thread: accept each, and destroy each id once its
  DISCONNECTED came; stop when ``count`` were served, or ``idle_s`` after the
  last event once none is open (before the first request: ``wait_s``).
  ``hold_s`` keeps the channel unread at first, so that requests queue in the
  kernel past the listener's backlog.

Every step of every connection is stamped on this host's CLOCK_MONOTONIC:
``[t_us, us]`` = when the call began and how long until its completion (the
call's return, or the event that ends the step).  Events are stamped by the
worker's poller as usual and returned in ``log``; the CM calls come back as
``actions`` for the controller to record, so the contract judges a storm
like any other run.
"""

from __future__ import annotations

import errno
import sys
import threading
import time
from typing import TYPE_CHECKING

from .cmscript import SWITCH_INTERVAL_S, now_us, sleep_until
from .librdmacm import RdmaError
from .protocol import (
    CMEventEntry,
    CMEventType,
    CMLogEntry,
    StormActionEntry,
    StormConn,
    StormParams,
    StormReply,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    from .cmworker import Worker

RESOLVE_MS = 2000
MAX_COUNT = 1024
MAX_TRAFFIC = 16  # SENDs per connection: the QP's depth (the peer posted as many receives)
TRAFFIC_BYTES = 1024
# Each connection's QP is as small as its traffic allows (as cmtime's, which posts no
# receive): a 64 KiB buffer and 16 receives per QP tripled an accept's cost on TCG.
QP_BUFFER = 4096
DEFAULT_WAIT_S = 30.0  # one step's bound (all connections)
DEFAULT_DEADLINE_S = 120.0
DEFAULT_IDLE_S = 5.0  # serve: no open connection and no event this long ends it
REPLIES: tuple[CMEventType, ...] = ("ESTABLISHED", "REJECTED", "UNREACHABLE", "CONNECT_ERROR")


class StormError(ValueError):
    """Storm params that cannot run (a missing key, a count out of range)."""


def problems(p: StormParams) -> list[str]:
    """What is wrong with a storm request, [] when nothing."""
    out = []
    count = p.get("count", 0)
    if not isinstance(count, int) or not 1 <= count <= MAX_COUNT:
        out.append(f"count must be 1..{MAX_COUNT}, not {count!r}")
    if p.get("role") == "connect":
        out += [f"connect needs {k}" for k in ("dst", "port") if not p.get(k)]
        if not 1 <= p.get("parallel", 1) <= 64:
            out.append(f"parallel must be 1..64, not {p.get('parallel')!r}")
        if not 0 <= p.get("traffic", 0) <= MAX_TRAFFIC:
            out.append(f"traffic must be 0..{MAX_TRAFFIC} SENDs, not {p.get('traffic')!r}")
    elif p.get("role") == "serve":
        if not 0 <= p.get("traffic", 0) <= MAX_TRAFFIC:
            out.append(f"traffic must be 0..{MAX_TRAFFIC} receives, not {p.get('traffic')!r}")
        if not p.get("listen_id"):
            out.append("serve needs listen_id (a listener made with op listen)")
    else:
        out.append(f"role must be connect or serve, not {p.get('role')!r}")
    return out


class _Conn:
    """One connection's handle, result and step stamps."""

    def __init__(self, index: int, tag: str) -> None:
        self.index, self.tag = index, tag
        self.id: int | None = None  # the cm_id's handle, once made
        self.handle: int | None = None  # the same while the id lives
        self.result = "ok"
        self.steps: dict[str, list[int]] = {}
        self.started: dict[str, int] = {}

    @property
    def live(self) -> bool:
        return self.handle is not None and self.result == "ok"

    def fail(self, why: str) -> None:
        if self.result == "ok":
            self.result = why

    def wire(self) -> StormConn:
        out: StormConn = {"index": self.index, "tag": self.tag, "result": self.result}
        out["steps"] = self.steps
        if self.id is not None:
            out["id"] = self.id
        return out


def _qp(worker: Worker, handle: int, traffic: int) -> None:
    """A QP just deep enough for ``traffic`` SENDs, with as many receives posted."""
    worker.ch.create_qp(handle, depth=max(1, traffic), buf_size=QP_BUFFER)
    if traffic:
        worker.ch.post_recv(handle, traffic)


class _Run:
    """What both roles share: the worker, the stamps, the actions, the event scan."""

    def __init__(self, worker: Worker, p: StormParams) -> None:
        self.w, self.p = worker, p
        self.actions: list[StormActionEntry] = []
        self.lock = threading.Lock()
        self.deadline_us = now_us() + int(p.get("deadline_s", DEFAULT_DEADLINE_S) * 1e6)
        self.wait_s = p.get("wait_s", DEFAULT_WAIT_S)
        self.mark = len(worker.log.entries)  # events after this one are the storm's
        self.start_us = p.get("start_us", 0) or now_us()

    def act(
        self, name: str, handle: int, fn: Callable[..., object], *args: object, **params: object
    ) -> tuple[int, int, str, object]:
        """Call ``fn(handle, *args)`` (librdmacm), record it as action ``name`` with
        ``params``; (t_us, us, result, what fn returned)."""
        t0 = now_us()
        value: object = None
        try:
            value = fn(handle, *args)
            result = "ok"
        except RdmaError as e:
            result = errno.errorcode.get(e.errno or 0, str(e.errno))
        us = now_us() - t0
        entry: StormActionEntry = {
            "name": name,
            "id": handle,
            "t_us": t0,
            "us": us,
            "result": result,
            "params": dict(params),
        }
        with self.lock:
            self.actions.append(entry)
        return t0, us, result, value

    def events(self, start: int, timeout_us: int) -> tuple[list[CMEventEntry], int]:
        """Events logged from entry ``start`` on, waiting up to ``timeout_us`` for one."""
        log = self.w.log
        end = min(now_us() + timeout_us, self.deadline_us)
        with log.cond:
            while len(log.entries) <= start and now_us() < end:
                log.cond.wait(max(0.0, (end - now_us()) / 1e6))
            fresh: list[CMLogEntry] = log.entries[start:]
        return [e for e in fresh if e["kind"] == "event"], start + len(fresh)

    def reply(self, conns: list[_Conn]) -> StormReply:
        return {
            "t_us": self.start_us,
            "end_us": now_us(),
            "conns": [c.wire() for c in conns],
            "actions": self.actions,
            "log": list(self.w.log.entries[self.p.get("after", 0) :]),
        }


class _Connect(_Run):
    """The active side: every step for all connections, then the next step."""

    def run(self) -> StormReply:
        p = self.p
        tag = p.get("tag", "hil-storm-")
        conns = [_Conn(i, f"{tag}{i:04d}") for i in range(p["count"])]
        sleep_until(self.start_us)
        for c in conns:
            t0 = now_us()
            try:
                c.handle = c.id = self.w.ch.create_id()
            except RdmaError as e:
                c.fail(errno.errorcode.get(e.errno or 0, "create_id"))
                continue
            c.steps["create_id"] = [t0, now_us() - t0]
        src, dst, port = p.get("src"), p["dst"], p["port"]
        self._evented(
            conns,
            "resolve_addr",
            lambda h: self.w.ch.resolve_addr(h, dst, port, src, RESOLVE_MS),
            ("ADDR_RESOLVED",),
            ("ADDR_ERROR",),
        )
        self._evented(
            conns,
            "resolve_route",
            lambda h: self.w.ch.resolve_route(h, RESOLVE_MS),
            ("ROUTE_RESOLVED",),
            ("ROUTE_ERROR",),
        )
        for c in conns:
            if c.live:
                self._timed(c, "create_qp", lambda h: _qp(self.w, h, p.get("traffic", 0)))
        self._connect(conns, dst, port)
        if p.get("traffic", 0):
            self._traffic(conns, p["traffic"])
        up = [c for c in conns if c.live]
        disconnect = self.w.ch.disconnect
        self._evented(up, "disconnect", disconnect, ("DISCONNECTED",), (), action="disconnect")
        for c in conns:
            if c.handle is not None:
                self._destroy(c)
        return self.reply(conns)

    def _timed(self, c: _Conn, step: str, fn: Callable[[int], object]) -> None:
        assert c.handle is not None
        t0 = now_us()
        try:
            fn(c.handle)
        except RdmaError as e:
            c.fail(errno.errorcode.get(e.errno or 0, step))
            return
        c.steps[step] = [t0, now_us() - t0]

    def _evented(
        self,
        conns: list[_Conn],
        step: str,
        call: Callable[[int], object],
        done: tuple[CMEventType, ...],
        failed: tuple[CMEventType, ...],
        action: str | None = None,
    ) -> None:
        """Start ``step`` on every live connection, then wait for each one's ending event."""
        start = len(self.w.log.entries)
        waiting: dict[int, _Conn] = {}
        for c in conns:
            if not c.live:
                continue
            assert c.handle is not None
            h = c.handle
            if action:
                t0, _, result, _ = self.act(action, h, call)
            else:
                t0 = now_us()
                try:
                    call(h)
                    result = "ok"
                except RdmaError as e:
                    result = errno.errorcode.get(e.errno or 0, step)
            if result != "ok":
                c.fail(result)
                continue
            c.started[step] = t0
            waiting[h] = c
        self._await(waiting, step, done, failed, start)

    def _await(
        self,
        waiting: dict[int, _Conn],
        step: str,
        done: tuple[CMEventType, ...],
        failed: tuple[CMEventType, ...],
        start: int,
    ) -> None:
        """Stamp each waiting connection's step with its first ``done`` event; a ``failed``
        event, or none within the step's bound, fails it."""
        end = now_us() + int(self.wait_s * 1e6)
        while waiting and now_us() < min(end, self.deadline_us):
            events, start = self.events(start, end - now_us())
            for e in events:
                c = waiting.get(e["id"]) if e["id"] is not None else None
                if c is None or e["type"] not in done + failed:
                    continue
                del waiting[e["id"]]  # type: ignore[arg-type]
                if e["type"] in done:
                    t0 = c.started[step]
                    c.steps[step] = [t0, e["host_t_us"] - t0]
                else:
                    c.fail(e["type"])
        for c in waiting.values():
            c.fail(f"{step}: no {'/'.join(done)} within {self.wait_s:g}s")

    def _connect(self, conns: list[_Conn], dst: str, port: int) -> None:
        """rdma_connect every connection from ``parallel`` threads; wait for the replies."""
        start = len(self.w.log.entries)
        todo = [c for c in conns if c.live]
        waiting: dict[int, _Conn] = {}
        lock = threading.Lock()

        def issue() -> None:
            while True:
                with lock:
                    if not todo:
                        return
                    c = todo.pop(0)
                h = c.handle
                assert h is not None
                pdata = c.tag.encode()
                t0, _, result, _ = self.act(
                    "connect",
                    h,
                    self.w.ch.connect,
                    pdata,
                    dst=dst,
                    port=port,
                    private_data=pdata.hex(),
                    listener=True,
                )
                c.started["connect"] = t0
                with lock:
                    if result == "ok":
                        waiting[h] = c
                    else:
                        c.fail(result)

        threads = [
            threading.Thread(target=issue, daemon=True) for _ in range(self.p.get("parallel", 1))
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self._await(waiting, "connect", ("ESTABLISHED",), REPLIES[1:], start)

    def _traffic(self, conns: list[_Conn], sends: int) -> None:
        """``sends`` signaled SENDs on every connection, then each one's completions."""
        live = [c for c in conns if c.live]
        end = now_us() + int(self.wait_s * 1e6)
        pending: dict[int, int] = {}
        for c in live:
            assert c.handle is not None
            c.started["traffic"] = now_us()
            try:
                for _ in range(sends):
                    self.w.ch.post_send(c.handle, TRAFFIC_BYTES)
            except RdmaError as e:
                c.fail(errno.errorcode.get(e.errno or 0, "post_send"))
                continue
            pending[c.index] = sends
        while pending and now_us() < end:
            for c in live:
                if c.index not in pending or c.handle is None:
                    continue
                wcs = self.w.ch.poll_cq(c.handle)
                bad = [wc["status"] for wc in wcs if wc["status"]]
                if bad:
                    c.fail(f"traffic: completion status {bad[0]}")
                    del pending[c.index]
                    continue
                pending[c.index] -= len(wcs)
                if pending[c.index] <= 0:
                    del pending[c.index]
                    t0 = c.started["traffic"]
                    c.steps["traffic"] = [t0, now_us() - t0]
            time.sleep(0)
        for c in live:
            if c.index in pending:
                c.fail(f"traffic: {pending[c.index]} SENDs not completed in {self.wait_s:g}s")

    def _destroy(self, c: _Conn) -> None:
        assert c.handle is not None
        t0, us, result, blocked = self.act("destroy", c.handle, self.w.ch.destroy_id)
        if result == "ok":
            c.steps["destroy"] = [t0, blocked if isinstance(blocked, int) else us]
        else:
            c.fail(result)


class _Serve(_Run):
    """The passive side: accept each request, destroy each id once it is DISCONNECTED."""

    def run(self) -> StormReply:
        p = self.p
        listen = p["listen_id"]
        count, idle_us = p["count"], int(p.get("idle_s", DEFAULT_IDLE_S) * 1e6)
        hold_s = p.get("hold_s", 0.0)  # from start_us
        if hold_s > 0:
            self.w.paused.set()  # requests queue in the kernel (and past the backlog, rejected)
            sleep_until(self.start_us + int(hold_s * 1e6))
            self.w.paused.clear()
        by_id: dict[int, _Conn] = {}
        served, start = 0, self.mark
        last = max(now_us(), self.start_us)  # the active side's start, when given
        while served < count and now_us() < self.deadline_us:
            open_ = any(c.handle is not None for c in by_id.values())
            # Before the first request the active side may still be resolving: a step's bound.
            limit = idle_us if by_id else int(self.wait_s * 1e6)
            if not open_ and now_us() - last > limit:
                break  # every request seen was served, and no new one came
            events, start = self.events(start, min(idle_us, 100_000))
            for e in events:
                last = e["host_t_us"]
                if e["type"] == "CONNECT_REQUEST" and e["listen_id"] == listen:
                    pdata = bytes.fromhex(e["private_data"]).rstrip(b"\0")  # padded by some
                    new = _Conn(len(by_id), pdata.decode(errors="replace"))
                    assert e["id"] is not None
                    new.handle = new.id = e["id"]
                    by_id[e["id"]] = new
                    self._accept(new, e["host_t_us"])
                    continue
                c = by_id.get(e["id"]) if e["id"] is not None else None
                if c is None or c.handle is None:
                    continue
                if e["type"] == "ESTABLISHED":
                    t0 = c.started.get("established", e["host_t_us"])
                    c.steps["established"] = [t0, e["host_t_us"] - t0]
                elif e["type"] == "DISCONNECTED":
                    c.steps["disconnected"] = [e["host_t_us"], 0]
                    self._destroy(c)
                    served += 1
                elif e["type"] in REPLIES:
                    c.fail(e["type"])
                    self._destroy(c)
                    served += 1
        return self.reply(list(by_id.values()))

    def _accept(self, c: _Conn, request_us: int) -> None:
        h = c.handle
        assert h is not None
        receives = self.p.get("traffic", 0)

        def accept(handle: int) -> None:
            _qp(self.w, handle, receives)
            self.w.ch.accept(handle)

        t0, us, result, _ = self.act("accept", h, accept, storm=True)
        if result != "ok":
            c.fail(result)
            self._destroy(c)
            return
        c.steps["accept"] = [request_us, t0 + us - request_us]
        c.started["established"] = t0 + us

    def _destroy(self, c: _Conn) -> None:
        assert c.handle is not None
        t0, us, result, blocked = self.act("destroy", c.handle, self.w.ch.destroy_id)
        c.steps["destroy"] = [t0, blocked if isinstance(blocked, int) else us]
        if result != "ok":
            c.fail(result)
        c.handle = None


def run(worker: Worker, params: StormParams) -> StormReply:
    """Check and run one storm role on ``worker``; :class:`StormError` when malformed."""
    wrong = problems(params)
    if wrong:
        raise StormError("; ".join(wrong))
    old = sys.getswitchinterval()
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    try:
        if params["role"] == "serve":
            return _Serve(worker, params).run()
        return _Connect(worker, params).run()
    finally:
        sys.setswitchinterval(old)
