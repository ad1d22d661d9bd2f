"""A CM endpoint worker's operations: the requests its process serves (``server.py``).

Each operation is a method of :class:`Worker` of the name a request gives
(``protocol.CM_OPS``): it returns the reply dict, and RdmaError is its
failure.  The worker holds the channel, its log (``log.py``), the poller
that reads the channel (``poller.py``) and the connections' traffic
streams (``stream.py``).
"""

from __future__ import annotations

import errno
from collections.abc import Callable

from ...protocol import (
    CM_OP_NAMES,
    DESTROY_ORDERS,
    REGION_ACCESS,
    AcceptReply,
    AutoAnswer,
    CMActionEntry,
    CMEventEntry,
    CMEventType,
    CMOpName,
    ConnectReply,
    DestroyOrder,
    DestroyReply,
    EventsReply,
    FlushedReply,
    HandlesReply,
    IdTimedReply,
    LastReceivesParams,
    LastReceivesReply,
    LastSendsParams,
    LastSendsReply,
    MessagesParams,
    MessagesReply,
    PayloadParams,
    PayloadReply,
    QPInfo,
    QueryQPReply,
    ReadsParams,
    ReadsReply,
    ReceivedParams,
    ReceivedReply,
    RegionAccess,
    RegMrReply,
    RpingParams,
    RpingReply,
    RpingRole,
    ScenarioParams,
    ScenarioReply,
    ScenarioStep,
    SendBwParams,
    SendBwPhase,
    SendBwReply,
    StormParams,
    StormReply,
    StormRole,
    TimedReply,
)
from ..hostclock import now_us, since, stamp
from ..librdmacm import RESOLVE_MS, CMChannel, RdmaError
from ..librdmacm.ibverbs import QPResources
from . import payload, perftest, rping, script, storm
from .log import Log, matches
from .poller import Poller
from .stream import QP_DEPTH, Stream, StreamOps

# The SENDs before a close: fewer than the receives the peer keeps posted (QP_DEPTH),
# their lengths' sum (payload.last_lengths) well inside the 64 KiB buffer.
LAST_MAX = 8
LAST_COUNTS = range(1, LAST_MAX + 1)
READS_COUNTS = range(QP_DEPTH + 1)  # READs posted at once: at most the send queue's depth
# SENDs each way in one messages op: all posted at once, so at most either queue's depth.
MESSAGES_COUNTS = range(1, QP_DEPTH + 1)
RPING_COUNTS = range(1, 1001)  # pings in one rping op: one at a time, so any sane number


class Worker(StreamOps):
    """The channel, its log and poller, and the traffic streams (their ops: StreamOps)."""

    def __init__(self, channel: CMChannel) -> None:
        self.ch = channel
        self.log = Log()
        self.poller = Poller(channel, self.log, self._auto_answer)
        self.streams: dict[int, Stream] = {}

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
                entry["params"].update(local=accepted["local"], remote=accepted["remote"])
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
            if e["kind"] == "event" and matches(e, types, handle):
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
            self.poller.auto[h] = (auto, bytes.fromhex(private_data))
        return {"id": h, **since(t0)}

    def connect(
        self,
        dst: str,
        port: int,
        src: str | None = None,
        private_data: str = "",
        resolve_timeout: float = 10.0,
        ird: int = 1,
        ord: int = 1,
    ) -> ConnectReply:
        """Resolve address and route, make a QP, rdma_connect asking for ``ird`` and ``ord``;
        the reply comes as an event."""
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
            self.ch.connect(h, bytes.fromhex(private_data), ird, ord)
        except RdmaError as e:
            e.handle = h  # type: ignore[attr-defined]
            stamp(e, t0)
            raise
        took = now_us() - t0
        local, remote = self.ch.addresses(h)
        return {"id": h, "t_us": t0, "us": took, "qp": qp, "local": local, "remote": remote}

    def accept(self, id: int, private_data: str = "", ird: int = 1, ord: int = 1) -> AcceptReply:
        """Make a QP for a CONNECT_REQUEST's id, post receives, rdma_accept with ``ird``
        and ``ord``."""
        qp = self.ch.create_qp(id, depth=QP_DEPTH)
        self.ch.post_recv(id, QP_DEPTH)
        done = self._timed(self.ch.accept, id, bytes.fromhex(private_data), ird, ord)
        local, remote = self.ch.addresses(id)
        return {**done, "qp": qp, "local": local, "remote": remote}

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
        milliseconds early on a loaded guest: docs/races.md).
        """
        if order not in DESTROY_ORDERS:
            raise RdmaError("destroy", errno.EINVAL, f"order must be one of {DESTROY_ORDERS}")
        stream = self.streams.pop(id, None)
        if stream is not None:
            stream.stop()
        self.poller.auto.pop(id, None)
        if order == "qp_first":
            done = self._timed(self.ch.destroy_id, id)
            return {"t_us": done["t_us"], "us": done["us"]}
        t0 = now_us()
        try:
            returned = self.ch.destroy_id_first(id)
        except RdmaError as e:
            stamp(e, t0)
            raise
        return {"t_us": t0, "us": returned - t0, "qp_us": now_us() - returned}

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
        """Stop (or resume) reading events (:meth:`Poller.pause`): requests then stay
        unretrieved in the kernel."""
        return self.poller.pause(on)

    def scenario(
        self,
        steps: list[ScenarioStep],
        after: int = 0,
        start_us: int = 0,
        linger_s: float = 0.0,
        deadline_s: float = script.DEFAULT_DEADLINE_S,
    ) -> ScenarioReply:
        """Run a script of steps here, each at its trigger (script.py); the whole log."""
        params: ScenarioParams = {
            "steps": steps,
            "after": after,
            "linger_s": linger_s,
            "deadline_s": deadline_s,
        }
        if start_us:
            params["start_us"] = start_us
        return script.run(self, params)

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
        idle_s: float = storm.DEFAULT_IDLE_S,
        start_us: int = 0,
        wait_s: float = storm.DEFAULT_WAIT_S,
        deadline_s: float = storm.DEFAULT_DEADLINE_S,
        after: int = 0,
    ) -> StormReply:
        """Run one role of a connection storm here (storm.py): every step, stamped."""
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
        return storm.run(self, params)

    def payload(
        self,
        id: int,
        first: bool,
        peer: QPInfo,
        peer_address: str,
        seed: int = 0,
        mtu: int = 0,
        wait: float = 10.0,
    ) -> PayloadReply:
        """This end's part of the connection's payload check (payload.py), run while the
        other end runs its own: what it checked, byte for byte."""
        res = self._own_cq("payload", id)
        params: PayloadParams = {
            "id": id,
            "first": first,
            "peer": peer,
            "peer_address": peer_address,
            "seed": seed,
            "mtu": mtu,
            "wait": wait,
        }
        return payload.run(res, params)

    def reads(
        self,
        id: int,
        reader: bool,
        peer: QPInfo,
        count: int,
        seed: int = 0,
        wait: float = 10.0,
    ) -> ReadsReply:
        """This end's part of ``count`` concurrent RDMA READs (payload.py :func:`reads`),
        run while the other end runs its own."""
        res = self._own_cq("reads", id, count, READS_COUNTS)
        params: ReadsParams = {
            "id": id,
            "reader": reader,
            "peer": peer,
            "count": count,
            "seed": seed,
            "wait": wait,
        }
        return payload.reads(res, params)

    def flushed(self, id: int, wait: float = 10.0) -> FlushedReply:
        """The completions the cm_id's QP's CQ gives after it went to ERR, drained
        (payload.py :func:`flushed`): one per posted work request, flushed."""
        return payload.flushed(self._own_cq("flushed", id), {"id": id, "wait": wait})

    def last_sends(self, id: int, count: int, seed: int = 0, wait: float = 10.0) -> LastSendsReply:
        """Post ``count`` SENDs of distinct lengths and patterns and wait for them, right
        before this end closes (payload.py :func:`last_sends`)."""
        res = self._own_cq("last_sends", id, count, LAST_COUNTS)
        params: LastSendsParams = {"id": id, "count": count, "seed": seed, "wait": wait}
        return payload.last_sends(res, params)

    def last_receives(
        self, id: int, count: int, seed: int = 0, wait: float = 10.0
    ) -> LastReceivesReply:
        """The receiving end of the peer's :meth:`last_sends` and its close: each
        completion's poll time against this end's DISCONNECTED (payload.py)."""
        res = self._own_cq("last_receives", id, count, LAST_COUNTS)
        params: LastReceivesParams = {"id": id, "count": count, "seed": seed, "wait": wait}
        return payload.last_receives(res, params, lambda: self._gone_us(id))

    def received(self, id: int, wait: float = 10.0, size: int = 0, seed: int = 0) -> ReceivedReply:
        """The next receive completion and its bytes, checked against the pattern of
        ``seed`` when ``size`` is given (payload.py :func:`received`)."""
        params = ReceivedParams(id=id, wait=wait, size=size, seed=seed)
        return payload.received(self._own_cq("received", id), params)

    def messages(
        self, id: int, count: int, size: int, send_first: bool, seed: int = 0, wait: float = 10.0
    ) -> MessagesReply:
        """ucmatose's exchange: ``count`` SENDs of ``size`` bytes each way, this end's
        first when ``send_first`` (payload.py :func:`messages`)."""
        res = self._own_cq("messages", id, count, MESSAGES_COUNTS)
        params = MessagesParams(id=id, count=count, size=size, send_first=send_first)
        return payload.messages(res, {**params, "seed": seed, "wait": wait})

    def rping(
        self, id: int, role: RpingRole, count: int, size: int = 0, wait: float = 10.0
    ) -> RpingReply:
        """rping's protocol played as its ``role`` for ``count`` pings (rping.py)."""
        res = self._own_cq("rping", id, count, RPING_COUNTS)
        params = RpingParams(id=id, role=role, count=count)
        return rping.run(res, {**params, "size": size, "wait": wait})

    def send_bw(
        self, id: int, phase: SendBwPhase, data: int = 0, iters: int = 0, wait: float = 10.0
    ) -> SendBwReply:
        """perftest's ib_send_bw -R served as its server (perftest.py): ``setup`` on the
        control connection ``id``, then ``run`` with the data connection ``data``."""
        res = self._own_cq("send_bw", id)
        params = SendBwParams(id=id, phase=phase, wait=wait)
        if phase == "setup":
            return perftest.setup(res, params)
        if phase != "run":
            raise RdmaError("send_bw", errno.EINVAL, f"no phase {phase!r}")
        perftest.check_iters(iters, QP_DEPTH)
        return perftest.run(res, self._own_cq("send_bw", data), {**params, "iters": iters})

    def _own_cq(
        self, op: CMOpName, id: int, count: int = 0, counts: range | None = None
    ) -> QPResources:
        """The id's QP for an op that polls its CQ itself (:meth:`_cq_free`), refused
        also for a ``count`` (of work requests) out of ``counts`` (EINVAL)."""
        self._cq_free(op, id)
        if counts is not None and count not in counts:
            raise RdmaError(op, errno.EINVAL, f"count must be {counts[0]}..{counts[-1]}")
        return self.ch.resources(id)

    def _gone_us(self, id: int) -> int | None:
        """The host time of the id's DISCONNECTED, once the poller has read it."""
        for e in list(self.log.entries):
            if e["kind"] == "event" and e["type"] == "DISCONNECTED" and e["id"] == id:
                return e["host_t_us"]
        return None

    def query_qp(self, id: int) -> QueryQPReply:
        """The cm_id's QP's RDMA READ depths as ibv_query_qp(3) reports them."""
        t0 = now_us()
        initiator, responder = self.ch.rd_atomic(id)
        return {
            **since(t0),
            "max_rd_atomic": initiator,
            "max_dest_rd_atomic": responder,
        }

    def reg_mr(self, id: int, length: int, access: list[RegionAccess] | None = None) -> RegMrReply:
        """Register a region of ``length`` bytes on the id's PD with ``access`` (default:
        every right), kept until the id's QP goes: its STag, base address and length."""
        t0 = now_us()
        rights = list(REGION_ACCESS) if access is None else list(access)
        try:
            stag, base = self.ch.reg_mr(id, length, rights)
        except RdmaError as e:
            stamp(e, t0)
            raise
        return {**since(t0), "stag": stag, "base": base, "length": length, "access": rights}

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
            stamp(e, t0)
            raise
        return since(t0)


# The operations a request may name: Worker's methods of these names (protocol.CM_OPS).
OPS: tuple[CMOpName, ...] = CM_OP_NAMES
