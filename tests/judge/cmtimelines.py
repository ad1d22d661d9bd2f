"""Hand-built timelines for the contract tests: conforming runs of each scenario.

Times are given in milliseconds on the controller base; host stamps are
derived from fixed clock offsets; each host's channel numbers its events in
the order they are added (``seq``).
"""

from __future__ import annotations

import errno
from dataclasses import dataclass, field, replace
from typing import Any

from hil.judge.timeline import Action, ClockOffset, Event, KernelLogLine, ResourceCount, Timeline

HOSTS = {"a": "lab-a", "b": "lab-b"}
OFFSETS = {"a": 1_000_000, "b": -2_500_000}  # controller = host + offset
UNCERTAINTY_US = 300


@dataclass
class Builder:
    """Collects events and actions of one scenario run."""

    scenario: str
    provider: str = "siw"
    events: list[Event] = field(default_factory=list)
    actions: list[Action] = field(default_factory=list)
    resources: list[ResourceCount] = field(default_factory=list)
    kernel_log: list[KernelLogLine] = field(default_factory=list)

    def ev(
        self,
        side: str,
        type_: str,
        cm_id: str,
        t_ms: float,
        status: int = 0,
        conn: str | None = "c1",
        listen_id: str | None = None,
        pdata: str = "",
    ) -> Builder:
        """Add an event delivered on ``side``'s channel."""
        t_us = int(t_ms * 1000)
        seq = sum(1 for e in self.events if e.side == side)
        self.events.append(
            Event(
                HOSTS[side],
                side,
                t_us,
                t_us - OFFSETS[side],
                type_,
                status,
                cm_id,
                listen_id,
                pdata,
                conn,
                seq,
            )
        )
        return self

    def act(
        self,
        side: str,
        name: str,
        cm_id: str | None,
        t_ms: float,
        result: str | int = "ok",
        duration_ms: float | None = None,
        **params: Any,
    ) -> Builder:
        """Add an action the controller made ``side`` do."""
        dur = None if duration_ms is None else int(duration_ms * 1000)
        self.actions.append(Action(int(t_ms * 1000), side, name, cm_id, params, result, dur))
        return self

    def build(self) -> Timeline:
        """The timeline, events and actions in time order."""
        offsets = tuple(ClockOffset(HOSTS[s], OFFSETS[s], UNCERTAINTY_US) for s in "ab")
        return Timeline(
            self.scenario,
            self.provider,
            (HOSTS["a"], HOSTS["b"]),
            tuple(self.actions),
            tuple(self.events),
            offsets,
            tuple(self.resources),
            tuple(self.kernel_log),
        ).sorted()


def connect(
    b: Builder, conn: str = "c1", a_id: str = "a:1", b_id: str = "b:2", t0: float = 0.0
) -> Builder:
    """A successful connect from side a to a listener b:1 on side b, with private data
    both ways, each delivered exactly."""
    b.act("a", "connect", a_id, t0 + 1, listener=True, private_data="C0FFEE")
    b.ev("a", "ADDR_RESOLVED", a_id, t0 + 0.5, conn=conn)
    b.ev("a", "ROUTE_RESOLVED", a_id, t0 + 0.8, conn=conn)
    b.ev("b", "CONNECT_REQUEST", b_id, t0 + 3, conn=conn, listen_id="b:1", pdata="c0ffee")
    b.act("b", "accept", b_id, t0 + 4, private_data="0a0b")
    b.ev("b", "ESTABLISHED", b_id, t0 + 6, conn=conn)
    b.ev("a", "ESTABLISHED", a_id, t0 + 7, conn=conn, pdata="0a0b")
    return b


def connected(provider: str = "siw") -> Builder:
    """A listener on b and one connection c1 (a:1 <-> b:2)."""
    b = Builder("connect", provider)
    b.act("b", "listen", "b:1", 0, backlog=8)
    return connect(b)


def orderly_close(provider: str = "siw", status: int = 0, local_ms: float = 2.0) -> Timeline:
    """Connect, then rdma_disconnect on a; both sides get DISCONNECTED(status)."""
    b = connected(provider)
    b.scenario = "close"
    b.act("a", "disconnect", "a:1", 100)
    b.ev("a", "DISCONNECTED", "a:1", 100 + local_ms, status)
    b.ev("b", "DISCONNECTED", "b:2", 103, status)
    end = 200 + local_ms  # destroy only after both DISCONNECTEDs (invariant 5)
    b.act("a", "destroy", "a:1", end, duration_ms=0.1)
    b.act("b", "destroy", "b:2", end + 1, duration_ms=0.1)
    return b.build()


def close_with_peer_status(provider: str, peer: int) -> Timeline:
    """Connect, a closes orderly; b's DISCONNECTED carries ``peer``, a's 0."""
    b = connected(provider)
    b.scenario = "close"
    b.act("a", "disconnect", "a:1", 100)
    b.ev("a", "DISCONNECTED", "a:1", 102)
    b.ev("b", "DISCONNECTED", "b:2", 103, peer)
    b.act("a", "destroy", "a:1", 200, duration_ms=0.1)
    b.act("b", "destroy", "b:2", 201, duration_ms=0.1)
    return b.build()


def qp_err_close(provider: str, local: int, peer: int) -> Timeline:
    """Connect, then the QP on a moved to ERR (abortive close)."""
    b = connected(provider)
    b.scenario = "abort"
    b.act("a", "qp_err", "a:1", 100)
    b.ev("a", "DISCONNECTED", "a:1", 101, local)
    b.ev("b", "DISCONNECTED", "b:2", 104, peer)
    return b.build()


def rejected(
    provider: str = "siw",
    status: int = -errno.ECONNRESET,
    reply: str = "REJECTED",
    pdata: str = "abcd",
) -> Timeline:
    """Connect refused by rdma_reject on b with private data."""
    b = Builder("reject", provider)
    b.act("b", "listen", "b:1", 0, backlog=8)
    b.act("a", "connect", "a:1", 1, listener=True)
    b.ev("b", "CONNECT_REQUEST", "b:2", 3, listen_id="b:1")
    b.act("b", "reject", "b:2", 4, private_data="ABCD")
    b.ev("a", reply, "a:1", 6, status, pdata=pdata)
    return b.build()


def no_listener(provider: str, result: str | int, reply: str | None = None) -> Timeline:
    """Connect to a port nobody listens on."""
    b = Builder("no-listener", provider)
    b.act("a", "connect", "a:1", 1, result, listener=False)
    if reply:
        # cma.c cma_iw_handler: the CONNECT_REPLY status decides the event type.
        status = {"UNREACHABLE": -errno.ETIMEDOUT, "CONNECT_ERROR": -errno.EHOSTUNREACH}
        b.ev("a", reply, "a:1", 3, status.get(reply, -errno.ECONNRESET))
    return b.build()


def destroy_in_conn_sent(duration_ms: float | None, result: str = "ok") -> Timeline:
    """Connect to a listener that never answers, then destroy the connecting id."""
    b = Builder("destroy-during-connect")
    b.act("b", "listen", "b:1", 0, backlog=8)
    b.act("a", "connect", "a:1", 1, listener=True)
    b.ev("b", "CONNECT_REQUEST", "b:2", 3, listen_id="b:1")
    b.act("a", "destroy", "a:1", 10, result, duration_ms=duration_ms)
    return b.build()


def listener_destroyed(
    pending_reply: str = "REJECTED",
    accepted_lost: bool = False,
    destroy_ms: float = 1,
    destroy_result: str = "ok",
    own_close_ms: float | None = None,
) -> Timeline:
    """c1 accepted, c2 pending (not retrieved) when the listener b:1 is destroyed at
    30 ms; ``accepted_lost``: c1's passive end DISCONNECTED at 34 ms; ``own_close_ms``:
    the test's own close of c1 then."""
    b = connected()
    b.scenario = "listener-destroy"
    b.act("a", "connect", "a:3", 20, listener=True)
    b.ev("a", "ADDR_RESOLVED", "a:3", 19, conn="c2")
    b.act("b", "destroy", "b:1", 30, destroy_result, duration_ms=destroy_ms)
    b.ev("a", pending_reply, "a:3", 30 + destroy_ms + 2, -errno.ECONNRESET, conn="c2")
    if accepted_lost:
        b.ev("b", "DISCONNECTED", "b:2", 34)
    if own_close_ms is not None:
        b.act("a", "disconnect", "a:1", own_close_ms)
    return b.build()


# What each siw pull mode leaves on the pulled end (lab-a) while pulled: netdev up,
# carrier, operstate, blackholed, RDMA port state; and the port events of pull and restore.
PULLED = {
    "admin": (False, False, "DOWN", False, "DOWN"),
    "carrier": (True, False, "DOWN", False, "ACTIVE"),
    "blackhole": (True, True, "UP", True, "ACTIVE"),
}
PORT_EVENTS = {"admin": ("IBV_EVENT_PORT_ERR", "IBV_EVENT_PORT_ACTIVE")}
UP = (True, True, "UP", False, "ACTIVE")


def end(host: str, state: tuple[bool, bool, str, bool, str] = UP) -> dict[str, Any]:
    """One end of the link as a ``link_state`` action records it."""
    up, carrier, operstate, blackholed, port = state
    return {
        "host": host,
        "port": "p1",
        "netdev": "eth1",
        "up": up,
        "carrier": carrier,
        "operstate": operstate,
        "blackholed": blackholed,
        "port_state": port,
    }


def link_pull(
    detect_ms: float | None,
    traffic: bool = True,
    restore_ms: float = 60_000,
    mode: str = "carrier",
    watched: tuple[str, ...] | None | bool = True,
    watch_result: str = "ok",
    pulled: tuple[bool, bool, str, bool, str] | None = None,
    restored: tuple[bool, bool, str, bool, str] = UP,
) -> Timeline:
    """Connect, pull the link (side a) at 100 ms, maybe DISCONNECTED, its ends sampled at
    ``restore_ms`` - 100 (``pulled``: side a's end, by default as siw's ``mode`` leaves
    it), restore, sampled again (``restored``); watched for async events from 60 ms
    until after the restore (``watched``: what it saw, True: what siw reports, None: no
    watch)."""
    b = connected()
    b.scenario = "link-pull"
    if watched is not None:
        seen = list(PORT_EVENTS.get(mode, ())) if watched is True else list(watched or ())
        b.act("a", "async_watch", None, 60, watch_result, restore_ms + 1_000, events=seen)
    b.act(
        "a",
        "pull",
        None,
        100,
        mode="admin" if mode == "admin" else "carrier",
        method=mode,
        traffic=traffic,
    )
    if detect_ms is not None:
        b.ev("a", "DISCONNECTED", "a:1", 100 + detect_ms)
    ends = [end("lab-a", pulled or PULLED[mode]), end("lab-b")]
    b.act("a", "link_state", None, restore_ms - 100, phase="pulled", ends=ends)
    b.act(
        "a",
        "restore",
        None,
        restore_ms,
        mode="admin" if mode == "admin" else "carrier",
        method=mode,
    )
    ends = [end("lab-a", restored), end("lab-b")]
    b.act("a", "link_state", None, restore_ms + 500, phase="restored", ends=ends)
    return b.build()


def with_evidence(tl: Timeline, after_cm_id: int = 0, log: tuple[str, ...] = ()) -> Timeline:
    """``tl`` with resource counts (cm_id after = before + after_cm_id) and log lines."""
    res = tuple(
        ResourceCount(h, kind, 2, 2 + (after_cm_id if kind == "cm_id" else 0))
        for h in HOSTS.values()
        for kind in ("cm_id", "qp", "cq", "mr")
    )
    lines = tuple(KernelLogLine(HOSTS["b"], line) for line in log)
    return replace(tl, resources=res, kernel_log=lines)
