"""Race: the passive side's ``rdma_destroy_id`` of a listener against a request to it.

Each round has its own listener: the passive host's script listens on a
fresh port, and destroys that listener ``delay`` after the time the active
host's script connects to it (both scripts started together, each host's
times computed from its measured offset).  The connect op resolves address
and route before it calls rdma_connect, which takes milliseconds and varies
(tens of them on a debug kernel), so the stamps, not the delay, place each
round, and the delays sweep a window around an aim read from those stamps:
the delay that fell inside the most rounds' ``pending`` windows so far (from
rdma_connect's return to the request's delivery, :func:`window`;
:mod:`hil.cm.races.aim`).  Before any round gave one, ``delay = window +
offset``: ``0 .. 2 * window`` from the connect step's time.

A round is classified from what each host saw (:func:`classify`; exact,
each on one host's clock):

- ``request_first``: the CONNECT_REQUEST was delivered to the passive
  application before the listener's destroy began: the child id survives
  the listener (the controller then destroys it: the active side gets
  REJECTED);
- ``pending``: rdma_connect succeeded (the listener took the TCP
  connection), and its CONNECT_REQUEST was not delivered before the destroy
  began: the request was in the kernel when the listener went, and the
  active side's reply says what became of it;
- ``destroy_first``: rdma_connect failed: the listener was gone;
- ``unclear``: the destroy did not run.

The contract judges every round (the active side's one reply, no event
after a destroy, resources back, kernel log clean).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import hil.cm.races.core as core
from hil.cm import steps
from hil.cm.clock import controller_us
from hil.cm.races.aim import aim, aimed_delay
from hil.cm.races.conns import dial_port, request_of
from hil.cm.scenario import LEAD_S, Script, Step, StepRun, together
from hil.judge.timeline import Event

if TYPE_CHECKING:
    from hil.cm.endpoint import Endpoint
    from hil.cm.recording import Recording
    from hil.cm.sides import PairSides

ORDERS = ("destroy_first", "pending", "request_first")
# Each order is read on one host's clock (or from rdma_connect's result).  pending's
# window is a few ms wide on the plain kernel and lay between delays 24 and 48 ms on a
# debug one, where an unaimed bounded sweep of 26 rounds over 0..400 ms missed it: the
# sweep aims at it (a bounded one with both outer orders spends its rest there).
CERTAIN = ("destroy_first", "request_first")
AIMED = ("pending",)
LISTEN_AHEAD_US = 50_000  # a round's listener is up this long before its connect
GAP_US = 50_000  # between one round's destroy and the next round's listen
START_MARGIN_US = 100_000  # past together()'s common start
FULL = core.Budget(15_000, 500, rounds=2)  # destroys 0 .. 30 ms after the connect step's time


@dataclass(frozen=True)
class _Asked:
    tag: str
    offset_us: int
    delay_us: int
    at_us: int  # the connect step's time (controller µs): the delay counts from it
    connect: StepRun
    destroy: StepRun


def classify(connect: StepRun, destroy: StepRun, request: Event | None) -> tuple[str, str]:
    """The order of a listener's destroy and a request to it (see the module)."""
    if destroy.host_t_us is None:
        return core.UNCLEAR, f"the listener's destroy did not run ({destroy.result})"
    if not connect.ok:
        return "destroy_first", f"rdma_connect {connect.result}: the listener was gone"
    if request is not None and request.host_t_us < destroy.host_t_us:
        ahead = destroy.host_t_us - request.host_t_us
        return "request_first", f"CONNECT_REQUEST delivered {ahead} µs before the destroy"
    after = "never delivered" if request is None else "delivered after the destroy began"
    return "pending", f"rdma_connect ok, its CONNECT_REQUEST {after}"


def window(asked: _Asked, request: Event | None) -> tuple[int, int | None] | None:
    """Where a round's ``pending`` order lay, as delays from its connect step's time: from
    rdma_connect's return (the listener had taken the connection by then) to the
    request's delivery (None: not delivered before the destroy); None when rdma_connect
    failed or did not run (no connection was taken: no window to see)."""
    connect = asked.connect
    if not connect.ok or connect.t_us is None:
        return None
    begin = connect.t_us + (connect.us or 0) - asked.at_us
    if request is None or asked.destroy.t_us is None or request.t_us >= asked.destroy.t_us:
        return begin, None
    return begin, request.t_us - asked.at_us


def sweep_destroy_listen(
    s: PairSides, budget: core.Budget = FULL, wanted: tuple[str, ...] = ORDERS
) -> core.RaceSweep:
    """Sweep a listener's destroy over the budget's window around the aim (see the module)."""
    with s.recording("race-destroy-listen-vs-request") as rec:
        passive = rec.endpoint(s.passive)
        active = rec.endpoint(s.active)
        asked: list[_Asked] = []
        aims: list[int] = []

        def batch(offset: int, n: int) -> None:
            at = aim(_windows(rec, asked))
            if at is not None:
                aims.append(at)
            delay = budget.window_us + offset if at is None else aimed_delay(budget, at, offset)
            tags = [f"hil-race-{len(asked) + i:04d}" for i in range(n)]
            asked.extend(_rounds(rec, active, passive, tags, offset, delay))
            _settle(rec, passive, asked[-n:])

        early = core.drive(budget, wanted, batch, lambda: _classified(rec, asked), AIMED)
        _replies(rec, active, asked)
        passive.collect(0.2)  # a late request for a destroyed listener would show by now
        steps.destroy(passive, *passive.handles())
    tl = rec.timeline()
    around = f"the connect step's time + {budget.window_us / 1e3:.1f} ms"
    if aims:
        spread_of = f"{min(aims) / 1e3:.1f}-{max(aims) / 1e3:.1f}"
        around += (
            f", then an aim of {spread_of} ms after it (connection taken, request not delivered)"
        )
    return core.RaceSweep(
        RACE, _classified(rec, asked), wanted, core.cross_host_uncertainty(tl), tl, around, early
    )  # fmt: skip


def _requests(rec: Recording, asked: list[_Asked]) -> list[tuple[str | None, Event | None]]:
    """Each round's child id on the passive side and its delivered CONNECT_REQUEST (None
    for either when there was none)."""
    delivered = {e.id: e for e in rec.events() if e.type == "CONNECT_REQUEST"}
    children = [request_of(rec, a.tag) for a in asked]
    return [(child, delivered.get(child) if child else None) for child in children]


def _windows(rec: Recording, asked: list[_Asked]) -> list[tuple[int, int | None]]:
    found = (
        window(a, request) for a, (_, request) in zip(asked, _requests(rec, asked), strict=True)
    )
    return [w for w in found if w is not None]


def _rounds(
    rec: Recording,
    active: Endpoint,
    passive: Endpoint,
    tags: list[str],
    offset: int,
    delay: int,
) -> list[_Asked]:
    """One listener per tag: listen, the connect at ``T_i``, the destroy ``delay`` after."""
    s = rec.session
    spacing = LISTEN_AHEAD_US + delay + GAP_US
    start = controller_us() + int(LEAD_S * 1e6) + START_MARGIN_US + LISTEN_AHEAD_US
    ports = [s.port() for _ in tags]
    a: list[Step] = []
    b: list[Step] = []
    for i, (tag, port) in enumerate(zip(tags, ports, strict=True)):
        t = start + i * spacing
        listen = {"address": s.address(s.passive), "port": port, "backlog": 4}
        b.append(Step("listen", name=f"l{i}", params=listen, at_us=t - LISTEN_AHEAD_US))
        b.append(Step("destroy", id_of=f"l{i}", at_us=t + delay))
        a.append(
            Step("connect", name=f"c{i}", params=dial_port(rec, s.passive, port, tag), at_us=t)
        )
    deadline = (len(tags) * spacing + 2 * START_MARGIN_US) / 1e6 + 10
    ra, rb = together(
        [(active, Script(tuple(a), deadline_s=deadline), 0),
         (passive, Script(tuple(b), deadline_s=deadline), 0)]
    )  # fmt: skip
    return [
        _Asked(tag, offset, delay, start + i * spacing, ra.steps[i], rb.steps[2 * i + 1])
        for i, tag in enumerate(tags)
    ]


def _settle(rec: Recording, passive: Endpoint, asked: list[_Asked]) -> None:
    """A batch's end: the delivered requests destroyed unanswered (the active side gets
    REJECTED for each)."""
    passive.collect(0.3)
    for a in asked:
        child = request_of(rec, a.tag)
        rec.label(a.tag, a.connect.id, child)
        steps.destroy(passive, child)


def _replies(rec: Recording, active: Endpoint, asked: list[_Asked]) -> None:
    """The sweep's end: each active id's reply awaited, then the id destroyed.  Once for
    all rounds: a pending request's reply may take the provider's connect timeout, and
    the rounds' timeouts run at once."""
    w = steps.waits(rec.session)
    for a in asked:
        if a.connect.id is None:
            continue
        if a.connect.ok:  # a failed rdma_connect gets no event
            active.wait(steps.REPLY_TYPES, a.connect.id, w.reply_s)
        steps.destroy(active, a.connect.id)


def _classified(rec: Recording, asked: list[_Asked]) -> tuple[core.Round, ...]:
    replies = {e.id: e for e in rec.events() if e.type in steps.REPLY_TYPES}
    clocks = core.cross_host_uncertainty(rec.timeline())
    done = []
    for a, (child, request) in zip(asked, _requests(rec, asked), strict=True):
        order, why = classify(a.connect, a.destroy, request)
        if a.connect.t_us is not None and a.destroy.t_us is not None:
            gap = a.destroy.t_us - a.connect.t_us
            why += f"; destroy {gap:+d} µs from rdma_connect's call +/- {clocks} µs"
            reply = replies.get(a.connect.id) if a.connect.id else None
            if reply is not None:
                why += f"; {reply.type}({reply.status}) {reply.t_us - a.connect.t_us} µs after it"
        ids = (a.connect.id, child)
        done.append(core.Round(a.tag, a.offset_us, a.delay_us, order, why, ids, a.destroy.us))
    return tuple(done)


RACE = core.register(
    core.Race(
        "destroy_listen",
        "destroy_listen vs a pending request",
        ("rdma_destroy_id of the listener (passive)", "rdma_connect (active)"),
        "CONNECT_REQUEST",
        ORDERS,
        CERTAIN,
        sweep_destroy_listen,
        FULL,
        AIMED,
    )
)
