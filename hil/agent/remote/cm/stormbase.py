"""What a storm's two roles share (storm.py): its limits, the request check, each
connection's record and the run's stamps, actions and channel reads."""

from __future__ import annotations

import contextlib
import errno
from typing import TYPE_CHECKING

from ...protocol import (
    CMEventType,
    StormActionEntry,
    StormConn,
    StormParams,
    StormReply,
)
from ..hostclock import now_us
from ..librdmacm import RawEvent, RdmaError, cook

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from .state import WorkerState

MAX_COUNT = 1024
MAX_TRAFFIC = 16  # SENDs per connection: the QP's depth (the peer posted as many receives)
TRAFFIC_BYTES = 1024
# Each connection's QP is as small as its traffic allows (as cmtime's, which posts no
# receive): a 64 KiB buffer and 16 receives per QP tripled an accept's cost on TCG.
QP_BUFFER = 4096
DEFAULT_WAIT_S = 30.0  # one step's bound (all connections)
DEFAULT_DEADLINE_S = 120.0
DEFAULT_IDLE_S = 5.0  # serve: no open connection and no event this long ends it
POLL_S = 0.1  # the longest one read of the channel blocks (deadlines are checked between)
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


class Conn:
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


def qp_maker(worker: WorkerState, traffic: int) -> Callable[[int], object]:
    """How a storm gives a connection its QP.  With ``traffic``: one deep enough for it,
    with its own PD, CQ and buffer, and (``post``) as many receives posted.  Without:
    cmtime's, a bare QP on the worker's one PD and CQ (no buffer, no receive)."""
    ch = worker.ch
    if not traffic:
        return ch.create_bare_qp

    def make(handle: int) -> None:
        ch.create_qp(handle, depth=traffic, buf_size=QP_BUFFER)
        ch.post_recv(handle, traffic)

    return make


# An action as the storm keeps it until its reply: (name, id, t_us, us, result, params).
Action = tuple[str, int, int, int, str, "dict[str, object]"]


class Run:
    """What both roles share: the worker, the stamps, the actions, the channel reads."""

    def __init__(self, worker: WorkerState, p: StormParams) -> None:
        self.w, self.p = worker, p
        # Tuples (a list append is atomic): the reply makes the protocol's dicts, not the storm.
        self.actions: list[Action] = []
        self.deadline_us = now_us() + int(p.get("deadline_s", DEFAULT_DEADLINE_S) * 1e6)
        self.wait_s = p.get("wait_s", DEFAULT_WAIT_S)
        self.mark = len(worker.log.entries)  # events after this one are the storm's
        self.raws: list[RawEvent] = []  # read, not yet logged (:meth:`flush`)
        self.start_us = p.get("start_us", 0) or now_us()

    @contextlib.contextmanager
    def channel(self) -> Iterator[None]:
        """Read the worker's channel in this thread (:meth:`read`) meanwhile: the poller is
        paused and its read lock held, so an event goes from ``rdma_get_cm_event`` to the
        storm's next call in one thread, with no hand-over and no other thread awake (on a
        one-vCPU TCG guest each hand-over cost milliseconds of the CPU siw needs).  The
        events read go into the worker's log when it ends (:meth:`flush`), before the
        poller reads again."""
        w = self.w
        w.poller.paused.set()  # the poller stops reading; once we hold its lock, it is out
        try:
            with w.poller.reading:
                try:
                    yield
                finally:
                    self.flush()
        finally:
            w.poller.paused.clear()

    def read(self, timeout_s: float) -> RawEvent | None:
        """The channel's next event within ``timeout_s``, stamped as the poller stamps it
        and kept raw (no dict, no text) until :meth:`flush`; an error is logged, as the
        poller's, and is None."""
        try:
            raw = self.w.ch.read_event(timeout_s)
        except RdmaError as e:
            self.flush()  # the log stays in the order things happened
            self.w.log.add({"kind": "error", "seq": 0, "message": str(e), "t_us": now_us()})
            return None
        if raw is not None:
            self.raws.append(raw)
        return raw

    def flush(self) -> None:
        """Log the events read so far, in order, as the poller logs them: after the timed
        steps, so that inside them an event costs its read and nothing else."""
        add = self.w.log.add
        for raw in self.raws:
            add({"kind": "event", "seq": 0, **cook(raw)})
        self.raws.clear()

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
        self.actions.append((name, handle, t0, us, result, params))
        return t0, us, result, value

    def reply(self, conns: list[Conn]) -> StormReply:
        actions: list[StormActionEntry] = [
            {"name": n, "id": h, "t_us": t, "us": us, "result": r, "params": dict(p)}
            for n, h, t, us, r, p in self.actions
        ]
        return {
            "t_us": self.start_us,
            "end_us": now_us(),
            "conns": [c.wire() for c in conns],
            "actions": actions,
            "log": list(self.w.log.entries[self.p.get("after", 0) :]),
        }
