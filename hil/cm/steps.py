"""The small steps CM sequences are made of: listen, establish, close, tear down.

Each step works on a :class:`~hil.cm.recording.Recording` and its
endpoints, so everything it does lands on the run's timeline.  A step that
needs something to succeed (``establish``) raises :class:`StepFailed` naming
the host, what failed and what was seen; steps whose outcome is the point of
the sequence (a reject, a connect with no listener) just return it.

How long a step waits comes from the pair's profiles (:func:`waits`), never
from one provider's constants: an iw_cxgb4 close may take up to
``ep_timeout_secs`` + 5 s and is still waited for, recorded and judged.  This
is the step layer of :mod:`hil.timeouts`: its slack is configurable, and a
step that runs out says so (``timeout (step layer, 75 s: iw_cxgb4 close bound
65 s + slack 10 s) waiting for DISCONNECTED on ...``).
"""

from __future__ import annotations

import ipaddress
import zlib
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from hil.agent.protocol import AutoAnswer
from hil.cm.endpoint import Endpoint, Outcome
from hil.errors import RemoteError
from hil.judge.timeline import SIDES, Event
from hil.timeouts import active, expired

if TYPE_CHECKING:
    from hil.cm.interfaces import PairView
    from hil.cm.recording import Recording

REPLY_TYPES = ("ESTABLISHED", "REJECTED", "UNREACHABLE", "CONNECT_ERROR")


def step_slack_s() -> float:
    """How much longer than a profile's bound a step waits (the step layer's slack,
    ``--hil-timeout-step-slack``; :mod:`hil.timeouts`): past the bound the contract
    fails the run, and a late event is still recorded and judged (late), not
    reported as missing."""
    return active().step_slack_s


@dataclass(frozen=True)
class Waits:
    """How long the steps wait on a pair: the slower host's bound plus the slack.

    ``reply_s``: a connect's answer or request (the connect timeout: siw's
    MPAREQ_TIMEOUT, iw_cxgb4's ``ep_timeout_secs``); ``close_s``: a close's
    DISCONNECTED (iw_cxgb4 waits up to ``ep_timeout_secs`` for the peer's
    FIN); ``destroy_s``: rdma_destroy_id, which may block for either, or on a
    listener until the provider lets it go (iw_cxgb4's firmware: up to
    C4IW_WR_TO).  Each ``*_why`` says where its bound came from, for a step's
    timeout message.
    """

    reply_s: float
    close_s: float
    destroy_s: float
    reply_why: str = ""
    close_why: str = ""
    destroy_why: str = ""


def waits(s: PairView) -> Waits:
    """The step timeouts of the pair ``s`` runs on, from both hosts' profiles."""
    profiles = [s.profile.of(s.host(side)) for side in SIDES]
    slack = step_slack_s()
    reply = max(profiles, key=lambda p: p.conn_sent_destroy_bound_s)
    close = max(profiles, key=lambda p: p.local_close_bound_s)
    reply_why = (
        f"{reply.name} reply bound {reply.conn_sent_destroy_bound_s:g} s + slack {slack:g} s"
    )
    close_why = f"{close.name} close bound {close.local_close_bound_s:g} s + slack {slack:g} s"
    reply_s = reply.conn_sent_destroy_bound_s + slack
    close_s = close.local_close_bound_s + slack
    listen = max(profiles, key=lambda p: p.listener_destroy_bound_s)
    listen_s = listen.listener_destroy_bound_s + slack
    listen_why = (
        f"{listen.name} listener destroy bound {listen.listener_destroy_bound_s:g} s "
        f"+ slack {slack:g} s"
    )
    destroy_s, destroy_why = max(
        (reply_s, reply_why), (close_s, close_why), (listen_s, listen_why), key=lambda w: w[0]
    )
    return Waits(reply_s, close_s, destroy_s, reply_why, close_why, destroy_why)


class StepFailed(RemoteError):
    """A step of a CM sequence did not get what it needs to go on."""


@dataclass(frozen=True)
class Listener:
    """A listening cm_id: its endpoint, id, port and the address it is bound to."""

    ep: Endpoint
    id: str
    port: int
    address: str = ""

    def target(self, data_address: str) -> str:
        """Where a connect to this listener goes: its own address, or ``data_address`` (the
        host's data address) when it is bound to none or to the wildcard."""
        if not self.address or ipaddress.ip_address(self.address).is_unspecified:
            return data_address
        return self.address


@dataclass(frozen=True)
class Conn:
    """One established connection: both endpoints, both ids and both QPs' buffers."""

    label: str
    active: Endpoint
    passive: Endpoint
    active_id: str
    passive_id: str
    active_qp: dict[str, int]
    passive_qp: dict[str, int]
    connect: Outcome
    established_us: int  # the active side's ESTABLISHED, controller time

    def end(self, which: str) -> tuple[Endpoint, str]:
        """The endpoint and id of the ``which`` ("active"/"passive") side."""
        return (
            (self.active, self.active_id) if which == "active" else (self.passive, self.passive_id)
        )


def listen(
    rec: Recording,
    side: str,
    auto: AutoAnswer | None = None,
    private_data: bytes = b"",
    backlog: int = 16,
    ep: Endpoint | None = None,
    address: str | None = None,
    port: int | None = None,
) -> Listener:
    """A listener on ``side``'s data address (or ``address``) and a fresh port (or
    ``port``), on a new endpoint unless ``ep``."""
    s = rec.session
    ep = ep or rec.endpoint(side)
    address = address or s.address(side)
    port = port or s.port()
    got = ep.listen(address, port, backlog, auto, private_data)
    if not got.ok or got.id is None:
        raise StepFailed(ep.host, f"cannot listen on {address}:{port}: {got.action.result}")
    return Listener(ep, got.id, port, address)


def start_connect(
    rec: Recording,
    active: Endpoint,
    listener: Listener,
    private_data: bytes = b"",
    listener_present: bool = True,
    depths: tuple[int, int] = (1, 1),
) -> Outcome:
    """rdma_connect from ``active`` to the listener's address and port (no waiting),
    asking ``depths`` = (IRD, ORD)."""
    s = rec.session
    return active.connect(
        listener.target(s.address(listener.ep.side)),
        listener.port,
        src=s.address(active.side),
        private_data=private_data,
        listener=listener_present,
        ird=depths[0],
        ord=depths[1],
    )


def expect(
    ep: Endpoint,
    types: str | tuple[str, ...],
    cm_id: str | None,
    what: str,
    timeout: float | None = None,
) -> Event:
    """Wait for an event (at most ``timeout``, default the pair's ``reply_s``) or raise
    :class:`StepFailed` saying what was seen instead."""
    why = ""
    if timeout is None:
        w = waits(ep.rec.session)
        timeout, why = w.reply_s, w.reply_why
    got = ep.wait(types, cm_id, timeout)
    if got is None:
        seen = "; ".join(e.brief() for e in ep.rec.events()[-6:]) or "no events"
        names = types if isinstance(types, str) else " or ".join(types)
        waiting = f"{names} for {cm_id or 'any id'} on {ep.host}"
        raise StepFailed(
            ep.host, f"{what}: {expired('step', timeout, waiting, why)} (last events: {seen})"
        )
    return got


def request(
    rec: Recording,
    active: Endpoint,
    listener: Listener,
    label: str,
    private_data: bytes = b"hil",
    what: str | None = None,
) -> tuple[Outcome, Event]:
    """rdma_connect and the listener's CONNECT_REQUEST for it, both labelled ``label``."""
    conn = start_connect(rec, active, listener, private_data)
    if not conn.ok or conn.id is None:
        raise StepFailed(
            active.host, f"connect {label} to port {listener.port} failed: {conn.action.result}"
        )
    req = expect(listener.ep, "CONNECT_REQUEST", None, what or f"connect {label}")
    rec.label(label, conn.id, req.id)
    return conn, req


def establish(
    rec: Recording,
    active: Endpoint,
    listener: Listener,
    label: str,
    private_data: bytes = b"hil",
    accept_data: bytes = b"hil-ok",
) -> Conn:
    """Connect and accept (explicitly, from the controller); both sides ESTABLISHED."""
    conn, req = request(rec, active, listener, label, private_data)
    acc = listener.ep.accept(req.id, accept_data)
    if not acc.ok:
        raise StepFailed(listener.ep.host, f"accept {label} failed: {acc.action.result}")
    return accepted(active, listener, label, conn, req, acc)


def accepted(
    active: Endpoint, listener: Listener, label: str, conn: Outcome, req: Event, acc: Outcome
) -> Conn:
    """A request ``req`` for connect ``conn`` that ``acc`` accepted: both sides ESTABLISHED."""
    assert conn.id is not None  # request() made sure
    est = expect(active, REPLY_TYPES, conn.id, f"connect {label}")
    if est.type != "ESTABLISHED":
        raise StepFailed(active.host, f"connect {label}: got {est.brief()}, not ESTABLISHED")
    expect(listener.ep, "ESTABLISHED", req.id, f"accept {label}")
    return Conn(
        label,
        active,
        listener.ep,
        conn.id,
        req.id,
        conn.value.get("qp", {}),
        acc.value.get("qp", {}),
        conn,
        est.t_us,
    )


def payload(conn: Conn) -> tuple[Outcome, Outcome]:
    """Check the connection's payload byte for byte, both ends at once (the agent's
    ``payload`` op): SEND, RDMA WRITE and RDMA READ each way, at 1 byte, the MTU - 1
    and + 1 and the largest message; each end's checks are its ``payload`` action,
    which the contract's ``payload-intact`` judges.  The pattern's seed is the label's."""
    s = conn.active.rec.session
    seed = zlib.crc32(conn.label.encode()) & 0xFFFF
    ends = (
        (conn.active, conn.active_id, True, conn.passive_qp, s.address(conn.passive.side)),
        (conn.passive, conn.passive_id, False, conn.active_qp, s.address(conn.active.side)),
    )
    with ThreadPoolExecutor(2, thread_name_prefix="payload") as pool:
        runs = [
            pool.submit(ep.payload, i, first, qp, addr, seed) for ep, i, first, qp, addr in ends
        ]
        active, passive = (r.result() for r in runs)
    return active, passive


LAST_SENDS = 4  # SENDs before an orderly close (the agent's last_lengths: 1024..256 bytes)


@contextmanager
def last_sends(conn: Conn, by: str, timeout: float) -> Iterator[None]:
    """Around a close by ``by``: the peer starts draining its CQ (the agent's
    ``last_receives``, until its DISCONNECTED), then ``by`` sends :data:`LAST_SENDS`
    SENDs and waits for them; the body closes.  The contract's ``close-delivers``
    judges the peer's ``last_receives`` action.  Seeded by the label, as the payload."""
    ep, cm_id = conn.end(by)
    peer, peer_id = conn.end("passive" if by == "active" else "active")
    seed = zlib.crc32(conn.label.encode()) & 0xFFFF
    with ThreadPoolExecutor(1, thread_name_prefix="last-receives") as pool:
        drain = pool.submit(peer.last_receives, peer_id, LAST_SENDS, seed, timeout)
        ep.last_sends(cm_id, LAST_SENDS, seed)
        yield
        drain.result()


def wait_disconnected(
    conn: Conn, timeout: float, sides: Iterable[str] = ("active", "passive")
) -> dict[str, Event | None]:
    """Each named side's DISCONNECTED on the connection (None when it did not come)."""
    found: dict[str, Event | None] = {}
    for which in sides:
        ep, cm_id = conn.end(which)
        found[which] = ep.wait("DISCONNECTED", cm_id, timeout) if ep.alive else None
    return found


def close(conn: Conn, by: str = "active", timeout: float | None = None) -> Outcome:
    """Orderly close started by ``by`` ("active"/"passive"); waits for both DISCONNECTED
    (at most ``timeout``, default the pair's ``close_s``)."""
    ep, cm_id = conn.end(by)
    why = ""
    if timeout is None:
        w = waits(ep.rec.session)
        timeout, why = w.close_s, w.close_why
    out = ep.disconnect(cm_id)
    if not out.ok:
        raise StepFailed(ep.host, f"disconnect {conn.label} failed: {out.action.result}")
    got = wait_disconnected(conn, timeout)
    missing = [w for w, e in got.items() if e is None]
    if missing:
        hosts = {"active": conn.active.host, "passive": conn.passive.host}
        where = " and ".join(f"the {w} side ({hosts[w]})" for w in missing)
        waiting = f"DISCONNECTED on {where}"
        raise StepFailed(
            ep.host,
            f"close of {conn.label} by the {by} side: {expired('step', timeout, waiting, why)}",
        )
    return out


def destroy(ep: Endpoint, *ids: str | None, timeout: float | None = None) -> list[Outcome]:
    """Destroy each of ``ids`` that is still alive on ``ep`` (others are skipped), each
    call bounded by ``timeout`` (default the pair's ``destroy_s``)."""
    if not ep.alive:
        return []
    timeout = waits(ep.rec.session).destroy_s if timeout is None else timeout
    alive = set(ep.handles())
    return [ep.destroy(i, timeout=timeout) for i in ids if i and i in alive]


def teardown(conn: Conn) -> None:
    """Destroy both ids of a connection (after its close)."""
    destroy(conn.active, conn.active_id)
    destroy(conn.passive, conn.passive_id)
