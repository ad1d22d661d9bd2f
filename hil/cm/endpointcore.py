"""What a CM endpoint's proxy (:class:`~hil.cm.endpoint.Endpoint`) rests on: the
worker it stands for, the timeline names of its cm_ids and its host's time on the
controller's, one recorded call (:meth:`EndpointCore.act`), and the event log it
fetches from the worker (:meth:`EndpointCore.collect`, :meth:`EndpointCore.wait`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from hil.agent import protocol as wire
from hil.agent.client import AgentCallError, cm_request, decode_reply
from hil.cm.clock import controller_us
from hil.errors import CommandTimeout, RemoteError
from hil.judge.timeline import Action, ClockOffset, Event

if TYPE_CHECKING:
    from hil.agent import Agent
    from hil.cm.interfaces import Recorder

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


class EndpointCore:
    """One CM endpoint's worker on one side of the pair: its calls and its event log."""

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
            responder_resources=raw.get("responder_resources"),
            initiator_depth=raw.get("initiator_depth"),
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
