"""A storm's active role (cmstorm.py): every step for all connections, then the next."""

from __future__ import annotations

import errno
import threading
import time
from typing import TYPE_CHECKING

from .cmscript import now_us, sleep_until
from .cmstormbase import REPLIES, RESOLVE_MS, TRAFFIC_BYTES, Conn, Run, qp_maker
from .librdmacm import RdmaError
from .protocol import CMEventEntry, CMEventType, CMLogEntry, StormReply

if TYPE_CHECKING:
    from collections.abc import Callable


class Connect(Run):
    """The active side: every step for all connections, then the next step."""

    def events(self, start: int, timeout_us: int) -> tuple[list[CMEventEntry], int]:
        """Events logged from entry ``start`` on, waiting up to ``timeout_us`` for one."""
        log = self.w.log
        end = min(now_us() + timeout_us, self.deadline_us)
        with log.cond:
            while len(log.entries) <= start and now_us() < end:
                log.cond.wait(max(0.0, (end - now_us()) / 1e6))
            fresh: list[CMLogEntry] = log.entries[start:]
        return [e for e in fresh if e["kind"] == "event"], start + len(fresh)

    def run(self) -> StormReply:
        p = self.p
        tag = p.get("tag", "hil-storm-")
        conns = [Conn(i, f"{tag}{i:04d}") for i in range(p["count"])]
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
        make_qp = qp_maker(self.w, p.get("traffic", 0))
        for c in conns:
            if c.live:
                self._timed(c, "create_qp", make_qp)
        self._connect(conns, dst, port)
        if p.get("traffic", 0):
            self._traffic(conns, p["traffic"])
        up = [c for c in conns if c.live]
        ch = self.w.ch

        def close(h: int) -> None:  # cmtime's disconnect step: its QP goes at once too
            ch.disconnect(h)
            ch.destroy_qp(h)

        self._evented(
            up, "disconnect", close, ("DISCONNECTED",), (), action="disconnect", destroy_qp=True
        )
        for c in conns:
            if c.handle is not None:
                self._destroy(c)
        return self.reply(conns)

    def _timed(self, c: Conn, step: str, fn: Callable[[int], object]) -> None:
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
        conns: list[Conn],
        step: str,
        call: Callable[[int], object],
        done: tuple[CMEventType, ...],
        failed: tuple[CMEventType, ...],
        action: str | None = None,
        **params: object,
    ) -> None:
        """Start ``step`` on every live connection, then wait for each one's ending event;
        with ``action``, each call is recorded as that action with ``params``."""
        start = len(self.w.log.entries)
        waiting: dict[int, Conn] = {}
        for c in conns:
            if not c.live:
                continue
            assert c.handle is not None
            h = c.handle
            if action:
                t0, _, result, _ = self.act(action, h, call, **params)
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
        waiting: dict[int, Conn],
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

    def _connect(self, conns: list[Conn], dst: str, port: int) -> None:
        """rdma_connect every connection from ``parallel`` threads; wait for the replies."""
        start = len(self.w.log.entries)
        todo = [c for c in conns if c.live]
        waiting: dict[int, Conn] = {}
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

    def _traffic(self, conns: list[Conn], sends: int) -> None:
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

    def _destroy(self, c: Conn) -> None:
        assert c.handle is not None
        t0, us, result, blocked = self.act("destroy", c.handle, self.w.ch.destroy_id)
        if result == "ok":
            c.steps["destroy"] = [t0, blocked if isinstance(blocked, int) else us]
        else:
            c.fail(result)
