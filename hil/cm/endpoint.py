"""The controller's proxy of one CM endpoint: a worker process on a host, via its agent.

Every call is recorded (into a :class:`~hil.cm.interfaces.Recorder`: the
run's :class:`~hil.cm.recording.Recording`) as an
:class:`~hil.judge.timeline.Action` stamped with the HOST's time of the call
(not the SSH round trip) moved onto the controller's time base, and every
event the endpoint's channel delivered as an :class:`~hil.judge.timeline.Event`.

A call that fails in librdmacm (``rdma_connect`` -> ECONNREFUSED) is a
result, not an exception: it is recorded with the errno's name and returned
as an :class:`Outcome` whose ``ok`` is False.  So is a call that overran its
timeout (result ``"timeout"``).  Lost agents and dead workers raise.

cm_ids are named ``"<side>:<endpoint>.<handle>"`` (``"b:2.4"``), unique
within a run even with several endpoints on one host.

Requests and replies are those ``hil.agent.remote.protocol`` declares (``wire``
here): each reply is decoded against its declaration before it is used.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from hil.agent.client import AgentCallError, call_bound, cm_request, decode_reply, request
from hil.agent.remote import protocol as wire
from hil.cm.clock import controller_us
from hil.errors import CommandTimeout, RemoteError
from hil.judge.timeline import Action, ClockOffset, Event

if TYPE_CHECKING:
    from hil.agent import Agent
    from hil.cm.interfaces import Recorder

OPEN_TIMEOUT = 30.0  # python start and librdmacm load in a TCG guest (or the agent layer's)
# Event.seq = endpoint number * SEQ_STRIDE + position in that endpoint's channel:
# unique per host, and in delivery order for endpoints used one after another.
SEQ_STRIDE = 1_000_000
P = TypeVar("P", bound=Mapping[str, Any])
R = TypeVar("R")
T = TypeVar("T", bound=wire.TimedReply)  # an operation recorded as an action


@dataclass(frozen=True)
class Outcome:
    """A recorded call: the action, and the worker's reply (``{}`` when it failed)."""

    action: Action
    value: Mapping[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """True when the call succeeded."""
        return self.action.ok

    @property
    def id(self) -> str | None:
        """The cm_id the call made or acted on."""
        return self.action.id


class Endpoint:
    """One CM endpoint (an event channel in its own process) on one side of the pair."""

    def __init__(
        self,
        rec: Recorder,
        side: str,
        host: str,
        agent: Agent,
        offset: ClockOffset,
        number: int,
        pid: int,
    ) -> None:
        self.rec, self.side, self.host, self.agent = rec, side, host, agent
        self.offset, self.number, self.pid = offset, number, pid
        self.alive = True
        self._cursor = 0
        self._seen: list[Event] = []  # every event fetched, in delivery order
        self._claimed: set[int] = set()  # seqs of events a wait() has returned

    @classmethod
    def open(
        cls, rec: Recorder, side: str, host: str, agent: Agent, offset: ClockOffset
    ) -> Endpoint:
        """Start a worker with its own event channel on ``host``."""
        # A raised agent call layer (--hil-timeout-agent: a debug lab's) raises this too.
        got = request(agent, wire.CM_OPEN, wire.NoParams(), max(OPEN_TIMEOUT, call_bound(None)))
        return cls(rec, side, host, agent, offset, got["endpoint"], got["pid"])

    # -- naming and time -----------------------------------------------------

    def name(self, handle: int | None) -> str | None:
        """The timeline id of a handle of this endpoint."""
        return None if handle is None else f"{self.side}:{self.number}.{handle}"

    def handle(self, cm_id: str) -> int:
        """The worker's handle of a timeline id of this endpoint."""
        prefix = f"{self.side}:{self.number}."
        if not cm_id.startswith(prefix):
            raise RemoteError(self.host, f"cm_id {cm_id} is not on endpoint {prefix[:-1]}")
        return int(cm_id[len(prefix) :])

    def to_controller(self, host_t_us: int) -> int:
        """A host timestamp on the controller's time base."""
        return host_t_us + self.offset.offset_us

    # -- the call ------------------------------------------------------------

    def _call(self, op: wire.CMOp[P, R], params: P, timeout: float | None = None) -> R:
        return cm_request(self.agent, self.number, op, params, timeout)

    def act(
        self,
        name: str,
        op: wire.CMOp[P, T],
        params: P,
        cm_id: str | None = None,
        *,
        record: dict[str, Any] | None = None,
        keep: tuple[str, ...] = (),
        timeout: float | None = None,
    ) -> Outcome:
        """Run ``op`` in the worker and record it as action ``name`` on ``cm_id``.

        ``params`` name the id (``self.handle(cm_id)``) when the op acts on one;
        ``record`` is what the action's params show (private data as hex...),
        and ``keep`` names keys of the reply they show too (a completion's status).
        """
        start = controller_us()
        try:
            value = self._call(op, params, timeout)
        except CommandTimeout:
            action = Action(
                start, self.side, name, cm_id, record or {}, "timeout", controller_us() - start
            )
            self.rec.add_action(action)
            return Outcome(action)
        except AgentCallError as e:
            if e.kind != "rdma":
                raise
            d = decode_reply(self.agent, f"cm_call {op.name} error", wire.CMErrorDetails, e.details)
            cm_id = cm_id or self.name(d.get("handle"))
            t_us = self.to_controller(d["t_us"]) if "t_us" in d else start
            action = Action(
                t_us,
                self.side,
                name,
                cm_id,
                record or {},
                str(d.get("errno_name") or e.errno),
                d.get("us"),
            )
            self.rec.add_action(action)
            return Outcome(action)
        made = value.get("id")  # the cm_id a listen or connect made
        reply: Mapping[str, object] = value
        cm_id = cm_id or self.name(made if isinstance(made, int) else None)
        action = Action(
            self.to_controller(value["t_us"]),
            self.side,
            name,
            cm_id,
            {**(record or {}), **{k: reply[k] for k in keep if k in reply}},
            "ok",
            value["us"],
        )
        self.rec.add_action(action)
        return Outcome(action, value)

    # -- CM operations -------------------------------------------------------

    def listen(
        self,
        address: str,
        port: int,
        backlog: int = 16,
        auto: wire.AutoAnswer | None = None,
        private_data: bytes = b"",
    ) -> Outcome:
        """A listener; ``auto="accept"|"reject"`` answers its requests in the worker."""
        params = wire.ListenParams(
            address=address, port=port, backlog=backlog, auto=auto, private_data=private_data.hex()
        )
        return self.act(
            "listen",
            wire.OP_LISTEN,
            params,
            record={"port": port, "backlog": backlog, "auto": auto},
        )

    def connect(
        self,
        dst: str,
        port: int,
        src: str | None = None,
        private_data: bytes = b"",
        timeout: float = 10.0,
        listener: bool = True,
    ) -> Outcome:
        """Resolve, make a QP and rdma_connect; ``listener=False`` marks a no-listener try."""
        params = wire.ConnectParams(
            dst=dst, port=port, src=src, private_data=private_data.hex(), resolve_timeout=timeout
        )
        return self.act(
            "connect",
            wire.OP_CONNECT,
            params,
            record={
                "dst": dst,
                "port": port,
                "private_data": private_data.hex(),
                "listener": listener,
            },
            timeout=timeout + 5,
        )

    def accept(self, cm_id: str, private_data: bytes = b"") -> Outcome:
        """rdma_accept a CONNECT_REQUEST (with a fresh QP)."""
        params = wire.AnswerParams(id=self.handle(cm_id), private_data=private_data.hex())
        return self.act(
            "accept", wire.OP_ACCEPT, params, cm_id, record={"private_data": private_data.hex()}
        )

    def reject(self, cm_id: str, private_data: bytes = b"") -> Outcome:
        """rdma_reject a CONNECT_REQUEST with private data."""
        params = wire.AnswerParams(id=self.handle(cm_id), private_data=private_data.hex())
        return self.act(
            "reject", wire.OP_REJECT, params, cm_id, record={"private_data": private_data.hex()}
        )

    def disconnect(self, cm_id: str) -> Outcome:
        """rdma_disconnect: orderly close."""
        return self.act("disconnect", wire.OP_DISCONNECT, self._id(cm_id), cm_id)

    def qp_err(self, cm_id: str) -> Outcome:
        """Move the QP to ERR: abortive close."""
        return self.act("qp_err", wire.OP_QP_ERR, self._id(cm_id), cm_id)

    def destroy(self, cm_id: str, timeout: float | None = None) -> Outcome:
        """rdma_destroy_id; the action's duration is how long it blocked on the host."""
        params = wire.DestroyParams(id=self.handle(cm_id))
        return self.act("destroy", wire.OP_DESTROY, params, cm_id, timeout=timeout)

    def stream_start(
        self,
        cm_id: str,
        mode: wire.StreamMode = "write",
        size: int = 4096,
        depth: int = 4,
        remote: Mapping[str, int] | None = None,
    ) -> Outcome:
        """Keep SENDs or RDMA WRITEs in flight on the connection (``sink`` receives);
        ``remote`` is the peer's buffer (``addr``, ``rkey``) for RDMA WRITEs."""
        buffer = wire.RemoteBuffer(addr=remote["addr"], rkey=remote["rkey"]) if remote else None
        params = wire.StreamStartParams(
            id=self.handle(cm_id), mode=mode, size=size, depth=depth, remote=buffer
        )
        return self.act(
            "traffic", wire.OP_STREAM_START, params, cm_id, record={"mode": mode, "size": size}
        )

    def write(
        self,
        cm_id: str,
        addr: int,
        rkey: int,
        length: int = 64,
        timeout: float = 10.0,
        **note: str,
    ) -> Outcome:
        """One signaled RDMA WRITE of ``length`` bytes to ``addr``/``rkey`` and its completion.

        Recorded as action ``write`` whose params show the target, ``note``
        (``how="bad_rkey"``) and the completion's ``wc_status`` and
        ``wc_status_name``; no completion within ``timeout`` is result ETIMEDOUT.
        """
        params = wire.WriteParams(
            id=self.handle(cm_id),
            remote=wire.RemoteBuffer(addr=addr, rkey=rkey),
            length=length,
            wait=timeout,
        )
        return self.act(
            "write",
            wire.OP_WRITE,
            params,
            cm_id,
            record={"addr": addr, "rkey": rkey, "length": length, **note},
            keep=("wc_status", "wc_status_name", "vendor_err"),
            timeout=timeout + 5,
        )

    def stream_stop(self, cm_id: str) -> wire.StreamStopReply:
        """Stop the stream; its counts (not recorded as an action)."""
        return self._call(wire.OP_STREAM_STOP, self._id(cm_id))

    def pause(self, on: bool = True) -> None:
        """Stop (or resume) reading events, leaving requests unretrieved in the kernel."""
        self._call(wire.OP_PAUSE, wire.PauseParams(on=on))

    def handles(self) -> list[str]:
        """The live cm_ids of this endpoint."""
        ids = self._call(wire.OP_HANDLES, wire.NoParams())["ids"]
        return [n for h in ids if (n := self.name(h))]

    def _id(self, cm_id: str) -> wire.IdParams:
        return wire.IdParams(id=self.handle(cm_id))

    # -- events --------------------------------------------------------------

    def collect(
        self, timeout: float = 0.0, types: tuple[str, ...] = (), cm_id: str | None = None
    ) -> list[Event]:
        """Fetch what the worker logged since the last fetch, waiting up to ``timeout``
        for an event of ``types`` (and of ``cm_id``); returns the new events."""
        if not self.alive:
            return []
        params = wire.EventsParams(
            after=self._cursor,
            wait=timeout,
            types=wire.decode(list[wire.CMEventType], list(types), "event types") or None,
            id=self.handle(cm_id) if cm_id else None,
        )
        got = self._call(wire.OP_EVENTS, params, timeout + 10)
        return self.ingest(got["log"])

    @property
    def cursor(self) -> int:
        """The seq of the last log entry fetched: a script's log starts after it."""
        return self._cursor

    def ingest(self, log: list[wire.CMLogEntry]) -> list[Event]:
        """Record the worker's log entries after :attr:`cursor` (from ``events`` or a
        script's reply): events, and the worker's own actions; returns the new events."""
        fresh: list[Event] = []
        for entry in log:
            if entry["seq"] <= self._cursor:
                continue
            self._cursor = entry["seq"]
            if entry["kind"] == "event":
                fresh.append(self._event(entry))
            elif entry["kind"] == "action":
                self.add_host_action(entry)
        if fresh:
            self.rec.add_events(fresh)
        self._seen += fresh
        return fresh

    def wait(
        self, types: tuple[str, ...] | str, cm_id: str | None = None, timeout: float = 10.0
    ) -> Event | None:
        """The first event of ``types`` (for ``cm_id``) no earlier wait returned, or None
        after ``timeout``; events fetched meanwhile for other waits count too."""
        types = (types,) if isinstance(types, str) else types
        deadline = controller_us() + timeout * 1e6
        fetched = False
        while True:
            for e in self._seen:
                if (
                    e.seq not in self._claimed
                    and e.type in types
                    and (cm_id is None or e.id == cm_id)
                ):
                    self._claimed.add(e.seq)
                    return e
            left = max(0.0, (deadline - controller_us()) / 1e6)
            if not self.alive or (fetched and left <= 0):
                return None
            self.collect(left, types, cm_id)
            fetched = True

    def _event(self, raw: wire.CMEventEntry) -> Event:
        return Event(
            host=self.host,
            side=self.side,
            t_us=self.to_controller(raw["host_t_us"]),
            host_t_us=raw["host_t_us"],
            type=raw["type"],
            status=raw["status"],
            id=self.name(raw["id"]) or "",
            listen_id=self.name(raw["listen_id"]),
            private_data=raw["private_data"],
            seq=self.number * SEQ_STRIDE + raw["seq"],
            local=raw["local"],
            remote=raw["remote"],
        )

    def add_host_action(self, raw: wire.CMActionEntry | wire.StormActionEntry) -> None:
        """Put a call the worker made by itself (an auto-answer, a storm's call) on the
        timeline, at its host time moved onto the controller's."""
        self.rec.add_action(
            Action(
                self.to_controller(raw["t_us"]),
                self.side,
                raw["name"],
                self.name(raw["id"]),
                raw["params"],
                raw["result"],
                raw["us"],
            )
        )

    # -- lifetime ------------------------------------------------------------

    def kill(self, ids: tuple[str, ...] = ()) -> Action:
        """SIGKILL the worker; recorded as a ``kill`` of each of ``ids`` (its connections)."""
        self.collect()
        got = request(self.agent, wire.CM_KILL, wire.EndpointParams(endpoint=self.number))
        self.alive = False
        t_us = self.to_controller(got["t_us"])
        actions = [Action(t_us, self.side, "kill", i, {"pid": self.pid}) for i in ids or (None,)]
        for a in actions:
            self.rec.add_action(a)
        return actions[0]

    def close(self, timeout: float | None = None) -> None:
        """Collect the last events, then end the worker in order (killed at the timeout)."""
        if not self.alive:
            return
        try:
            self.collect()
        finally:
            self.alive = False
            request(self.agent, wire.CM_CLOSE, wire.EndpointParams(endpoint=self.number), timeout)
