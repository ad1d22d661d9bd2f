"""A storm's active role (storm.py): every step for all connections, then the next.

Shaped as rdma-core's cmtime client, in one thread: the storm's thread reads
the worker's channel itself for the whole storm (``Run.channel``: the poller
is paused), so during the timed steps no other thread of the worker is
awake.  Each step makes every call (with ``parallel`` 1, the default, every
``rdma_connect`` too), taking the events already queued between two calls
without waiting (so each is stamped within one call of its arrival), then
reads the rest.  cmtime reads its events in a second thread meanwhile; in
Python that thread would take the GIL from the calls.  An event read inside
a step is kept raw (``Run.read``) and logged as a dict after the step.  ``parallel`` > 1
issues the connects from that many threads (siw's ``rdma_connect`` blocks
for a kernel TCP handshake), the replies read once they returned.
"""

from __future__ import annotations

import errno
import threading
import time
from typing import TYPE_CHECKING

from ...protocol import CMEventType, StormReply
from ..hostclock import now_us
from ..librdmacm import RESOLVE_MS, RawEvent, RdmaError
from .script import sleep_until
from .stormbase import POLL_S, REPLIES, TRAFFIC_BYTES, Conn, Run, qp_maker

if TYPE_CHECKING:
    from collections.abc import Callable


class Waiting:
    """The connections waiting for the event that ends ``step``, by cm_id handle."""

    def __init__(
        self, step: str, done: tuple[CMEventType, ...], failed: tuple[CMEventType, ...]
    ) -> None:
        self.step, self.done, self.ends = step, done, done + failed
        self.conns: dict[int, Conn] = {}

    def add(self, c: Conn, t0: int) -> None:
        """``c``'s call for the step began at ``t0`` and returned: its event may come."""
        assert c.handle is not None
        c.started[self.step] = t0
        self.conns[c.handle] = c

    def take(self, e: RawEvent) -> None:
        """Stamp the step of ``e``'s connection with its first ``done`` event; a failing
        one fails it; any other event (another step's, a late one) is only logged."""
        if e.id not in self.conns or e.type not in self.ends:
            return
        c = self.conns.pop(e.id)
        if e.type in self.done:
            t0 = c.started[self.step]
            c.steps[self.step] = [t0, e.host_t_us - t0]
        else:
            c.fail(e.type)


class Connect(Run):
    """The active side: every step for all connections, then the next step."""

    def run(self) -> StormReply:
        with self.channel():
            return self._steps()

    def _steps(self) -> StormReply:
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
        wait = Waiting(step, done, failed)
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
            wait.add(c, t0)
            self._drain(wait)
        self._await(wait)

    def _drain(self, wait: Waiting) -> None:
        """Take the events already queued, without waiting: between two calls, so that an
        event's stamp is within one call of its arrival (cmtime's event thread reads them
        as they come; a second Python thread here would take the GIL from the calls)."""
        while True:
            e = self.read(0)
            if e is None:
                return
            wait.take(e)

    def _await(self, wait: Waiting) -> None:
        """Read the channel until each waiting connection's step ended; a connection whose
        ending event did not come within the step's bound fails."""
        end = min(now_us() + int(self.wait_s * 1e6), self.deadline_us)
        while wait.conns:
            left = end - now_us()
            if left <= 0:
                break
            e = self.read(min(POLL_S, left / 1e6))
            if e is not None:
                wait.take(e)
        for c in wait.conns.values():
            c.fail(f"{wait.step}: no {'/'.join(wait.done)} within {self.wait_s:g}s")
        self.flush()  # the step's span is over: its events go into the log now

    def _connect(self, conns: list[Conn], dst: str, port: int) -> None:
        """rdma_connect every connection (from ``parallel`` threads when > 1), then read
        the replies."""
        todo = [c for c in conns if c.live]
        wait = Waiting("connect", ("ESTABLISHED",), REPLIES[1:])
        connect = self.w.ch.connect

        def issue(c: Conn) -> None:
            h = c.handle
            assert h is not None
            pdata = c.tag.encode()
            t0, _, result, _ = self.act(
                "connect",
                h,
                connect,
                pdata,
                dst=dst,
                port=port,
                private_data=pdata.hex(),
                listener=True,
            )
            if result == "ok":
                wait.add(c, t0)  # one key per thread's connection: a dict's setitem is atomic
            else:
                c.fail(result)

        def issue_all(part: list[Conn]) -> None:
            for c in part:
                issue(c)

        threads = self.p.get("parallel", 1)
        if threads <= 1:  # cmtime's: one thread makes the calls, no hand-over between them
            for c in todo:
                issue(c)
                self._drain(wait)
        else:
            pool = [
                threading.Thread(target=issue_all, args=(todo[k::threads],), daemon=True)
                for k in range(threads)
            ]
            for t in pool:
                t.start()
            for t in pool:
                t.join()
        self._await(wait)

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
