"""A storm's passive role (storm.py): accept each request, destroy each id on its close.

The serving thread reads the worker's channel itself (``Run.channel``), so an
event goes from ``rdma_get_cm_event`` to its accept or destroy in one
thread, and a request's QP and ``rdma_accept`` come first, right after its
read: the connection's record is made after the accept returned, and the
events are logged (as dicts, stamped when read) once the serving ended.
Events of other listeners on this worker are logged, not answered,
meanwhile.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

from ...protocol import CMEventEntry, StormParams, StormReply
from ..hostclock import now_us
from ..librdmacm import RawEvent, RdmaError
from .script import sleep_until
from .stormbase import DEFAULT_IDLE_S, POLL_S, REPLIES, Conn, Run, qp_maker

if TYPE_CHECKING:
    from .state import WorkerState


class Serve(Run):
    """The passive side: accept each request, destroy each id once it is DISCONNECTED."""

    def __init__(self, worker: WorkerState, p: StormParams) -> None:
        super().__init__(worker, p)
        self.by_id: dict[int, Conn] = {}
        self.served = 0
        self.open = 0  # ids accepted and not yet destroyed (counted: no scan per event)
        self.qp = qp_maker(worker, p.get("traffic", 0))  # receives for the peer's SENDs

    def run(self) -> StormReply:
        w = self.w
        if not self.p.get("traffic", 0):
            # Before the first request, as librdmacm's own PD is (cmtime's server uses it);
            # a listener without a device yet (a wildcard bind) gets it at the first QP.
            with contextlib.suppress(RdmaError):
                w.ch.shared_pd(self.p["listen_id"])
        with self.channel():
            hold_s = self.p.get("hold_s", 0.0)  # from start_us
            if hold_s > 0:  # requests queue in the kernel (and past the backlog, rejected)
                sleep_until(self.start_us + int(hold_s * 1e6))
            self._serve()
        return self.reply(list(self.by_id.values()))

    def _serve(self) -> None:
        p, log = self.p, self.w.log
        count, idle_us = p["count"], int(p.get("idle_s", DEFAULT_IDLE_S) * 1e6)
        last = max(now_us(), self.start_us)  # the active side's start, when given
        # What the poller logged before it stopped reading is the storm's too.
        for e in list(log.entries[self.mark :]):
            if e["kind"] == "event":
                last = e["host_t_us"]
                self._on(raw(e))
        while self.served < count and now_us() < self.deadline_us:
            # Before the first request the active side may still be resolving: a step's bound.
            limit = idle_us if self.by_id else int(self.wait_s * 1e6)
            if not self.open and now_us() - last > limit:
                break  # every request seen was served, and no new one came
            event = self.read(POLL_S)
            if event is None:
                continue
            last = event.host_t_us
            self._on(event)

    def _on(self, e: RawEvent) -> None:
        """Answer one event: accept a request of our listener, destroy a closed id."""
        if e.type == "CONNECT_REQUEST" and e.listen_id == self.p["listen_id"]:
            assert e.id is not None
            t0, us, result, _ = self.act("accept", e.id, self._qp_and_accept, storm=True)
            # The record after the accept: it is bookkeeping, the peer waits for the accept.
            new = Conn(len(self.by_id), e.private_data.rstrip(b"\0").decode(errors="replace"))
            new.handle = new.id = e.id
            self.by_id[e.id] = new
            self.open += 1
            if result != "ok":
                new.fail(result)
                self._destroy(new)
                return
            new.steps["accept"] = [e.host_t_us, t0 + us - e.host_t_us]
            new.started["established"] = t0 + us
            return
        c = self.by_id.get(e.id) if e.id is not None else None
        if c is None or c.handle is None:
            return
        if e.type == "ESTABLISHED":
            t0 = c.started.get("established", e.host_t_us)
            c.steps["established"] = [t0, e.host_t_us - t0]
        elif e.type == "DISCONNECTED":
            c.steps["disconnected"] = [e.host_t_us, 0]
            self._destroy(c)
            self.served += 1
        elif e.type in REPLIES:
            c.fail(e.type)
            self._destroy(c)
            self.served += 1

    def _qp_and_accept(self, handle: int) -> None:
        """The request's QP, then ``rdma_accept``: cmtime's server's two calls."""
        self.qp(handle)
        self.w.ch.accept(handle)

    def _destroy(self, c: Conn) -> None:
        assert c.handle is not None
        t0, us, result, blocked = self.act("destroy", c.handle, self.w.ch.destroy_id)
        c.steps["destroy"] = [t0, blocked if isinstance(blocked, int) else us]
        if result != "ok":
            c.fail(result)
        c.handle = None
        self.open -= 1


def raw(e: CMEventEntry) -> RawEvent:
    """A logged event as :meth:`Run.read` returns one (the addresses left out: unused)."""
    pdata = bytes.fromhex(e["private_data"])  # padded by some providers
    return RawEvent(
        e["type"], e["status"], e["id"], e["listen_id"], pdata, e["host_t_us"], b"", b""
    )
