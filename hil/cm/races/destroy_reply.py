"""Race: the active side's ``rdma_destroy_id`` against the CONNECT_REPLY of its connect.

The passive listener accepts in its worker.  The active side runs each batch
of rounds as a host-side script (:mod:`hil.cm.scenario`): connect, then
destroy a set delay after ``rdma_connect`` returned, with no controller round
trip between.  The delays sweep a window around an aim: the delay that fell
inside the most "sent, not yet delivered" windows measured so far (from
``rdma_connect``'s return: the peer's reply sent, plus the clocks'
uncertainty, to its delivery; calibration rounds first, then every round
whose reply was delivered, so the aim follows the lab's pace).  The passive
host's frames are held back on the wire for the sweep (``Budget.hold_us``,
:mod:`hil.cm.races.hold`), which keeps the reply on its way that much longer.

Each round is classified by the order that actually happened, read from the
stamps, never from the delay it asked for (:func:`classify`):

- ``reply_first``: the reply was delivered to the application before the
  destroy began (one host's clock: exact);
- ``in_flight``: the passive side had sent the reply before the destroy
  began, and it was not delivered before it: the destroy met the reply on its
  way or while it was being delivered.  Sent: its ``rdma_accept`` had
  returned, or its own ESTABLISHED was delivered (siw raises the passive
  ESTABLISHED upcall after it sent the MPA reply, inside ``rdma_accept``,
  which on the TCG lab often returns after the peer has the reply);
- ``destroy_first``: the destroy began before the passive side began to
  send the reply (or it never sent one);
- ``unclear``: the two hosts' stamps are closer than the clocks' uncertainty.

The last three compare two hosts' clocks, so they are certain only beyond
the summed offset uncertainty.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import hil.cm.races.core as core
from hil.cm import steps
from hil.cm.races.aim import aim, aim_windows, aimed_delay
from hil.cm.races.conns import dial
from hil.cm.races.hold import HOLD_US, passive_held
from hil.cm.scenario import ScenarioRun, Script, Step, StepRun, run
from hil.cm.steps import StepFailed
from hil.errors import InputError
from hil.judge.timeline import Action, Event, Timeline

if TYPE_CHECKING:
    from hil.cm.endpoint import Endpoint
    from hil.cm.recording import Recording
    from hil.cm.sides import PairSides
    from hil.cm.steps import Listener

ORDERS = ("destroy_first", "in_flight", "reply_first")
# in_flight's window (sent, not delivered) is 0.5-5 ms wide unheld (the hold adds its 6 ms)
# and moves by several ms from round to round on the TCG lab: the sweep aims at it, and a
# bounded sweep that has both outer orders spends its remaining rounds around the aim
# (core.drive); whether a lab reaches it in every run is measured, not assumed
# (docs/races.md, "In CI, and the full sweeps").
CERTAIN = ("destroy_first", "reply_first")
AIMED = ("in_flight",)
CALIBRATION_ROUNDS = 3
LINGER_S = 0.2  # after each script: a late event for a destroyed id would come by then
SETTLE_FETCHES = 10  # at most this many half-second fetches of the passive side's last events
# Delays 0 (right after rdma_connect: destroy_first) to the aim + 16 ms (reply_first).
FULL = core.Budget(16_000, 500, rounds=1, hold_us=HOLD_US)


@dataclass(frozen=True)
class _Asked:
    """A round as it was asked for: its tag, its steps' place in the script that ran it."""

    tag: str
    index: int  # its connect is the script's step 2 * index, its destroy the next
    offset_us: int
    delay_us: int
    run: ScenarioRun


def classify(
    destroy: StepRun,
    reply: Event | None,
    accept: Action | None,
    uncertainty_us: int,
    established: Event | None = None,
) -> tuple[str, str]:
    """The order of a destroy and its connect's reply, from the stamps (see the module);
    ``established``: the passive side's own ESTABLISHED, if it came."""
    if destroy.t_us is None or destroy.host_t_us is None:
        raise InputError(f"round's destroy never ran ({destroy.result})")
    if reply is not None and reply.host_t_us <= destroy.host_t_us:
        ahead = destroy.host_t_us - reply.host_t_us
        return "reply_first", f"{reply.type} delivered {ahead} µs before the destroy"
    if accept is None:
        return "destroy_first", "the passive side never sent a reply"
    before = accept.t_us - destroy.t_us  # > 0: the destroy began before the accept did
    clocks = f"clocks +/- {uncertainty_us} µs"
    if before > uncertainty_us:
        return "destroy_first", f"destroy {before} µs before the peer's accept began ({clocks})"
    sent = sent_us(accept, established)
    if sent is not None and destroy.t_us - sent > uncertainty_us:
        how = "accept returned" if sent == accept.end_us else "ESTABLISHED was delivered"
        return "in_flight", f"destroy {destroy.t_us - sent} µs after the peer's {how} ({clocks})"
    return core.UNCLEAR, f"destroy {-before} µs after the accept began, {clocks}"


def sent_us(accept: Action | None, established: Event | None) -> int | None:
    """When the passive side had surely sent its reply (controller µs): its rdma_accept
    returned, or its own ESTABLISHED was delivered, whichever came first (None: neither)."""
    done = [e.t_us for e in (established,) if e is not None]
    if accept is not None and accept.result == "ok":
        done.append(accept.end_us)
    return min(done) if done else None


def sweep_destroy_vs_reply(
    s: PairSides, budget: core.Budget = FULL, wanted: tuple[str, ...] = ORDERS
) -> core.RaceSweep:
    """Sweep the destroy over the budget's window around the aim (see the module); the
    window's low end, and any delay below 0, runs at 0: right after rdma_connect
    (``aimed_delay``)."""
    with s.recording("race-destroy-vs-reply") as rec, passive_held(s, rec, budget):
        listener = steps.listen(rec, s.passive, auto="accept", backlog=16)
        active = rec.endpoint(s.active)
        calibration, latency = _calibrate(rec, active, listener)
        asked: list[_Asked] = []
        aims: list[int] = []

        def batch(offset: int, n: int) -> None:
            tl = rec.timeline()
            clocks = core.cross_host_uncertainty(tl)
            measured = [_window(tl, a.tag, a.run.steps[2 * a.index], clocks) for a in asked]
            calibrated = [w for w in calibration(tl, clocks) if w is not None]
            windows = aim_windows(calibrated, [w for w in measured if w is not None])
            aims.append(aim(windows) or latency)
            # The passive ids of the rounds so far, their events in: kept, they exhaust the
            # passive host (after ~45 accepted ids its QP creation failed with EIO).
            steps.destroy(listener.ep, *(r.ids[1] for r in _classified(tl, asked)))
            delay = aimed_delay(budget, aims[-1], offset)
            tags = [f"hil-race-{len(asked) + i:04d}" for i in range(n)]
            got = _rounds(rec, active, listener, tags, delay)
            asked.extend(_Asked(tag, i, offset, delay, got) for i, tag in enumerate(tags))
            listener.ep.collect(0.3)  # the passive side's requests and accepts so far
            _label(rec, asked)

        early = core.drive(budget, wanted, batch, lambda: _classified(rec.timeline(), asked), AIMED)
        # The passive side's requests, accepts and closes of the last rounds.
        for _ in range(SETTLE_FETCHES):
            if not listener.ep.collect(0.5):
                break
        _label(rec, asked)
        steps.destroy(listener.ep, *listener.ep.handles())
    tl = rec.timeline()
    done = _classified(tl, asked)
    spread_of = f"{min(aims) / 1e3:.1f}-{max(aims) / 1e3:.1f}" if aims else "-"
    around = f"an aim of {spread_of} ms after rdma_connect (sent, not delivered)"
    return core.RaceSweep(RACE, done, wanted, core.cross_host_uncertainty(tl), tl, around, early)


def _calibrate(
    rec: Recording, active: Endpoint, listener: Listener
) -> tuple[Callable[[Timeline, int], list[Window]], int]:
    """Calibration rounds (connect, destroy on ESTABLISHED): their windows, read from a
    timeline that has the passive side's stamps too, and the median time from
    rdma_connect's return to the reply's delivery (the aim when no window is known)."""
    connects: list[tuple[str, StepRun]] = []
    took = []
    for i in range(CALIBRATION_ROUNDS):
        tag = f"hil-race-cal{i}"
        got = run(
            active,
            Script(
                (
                    Step("connect", name="c", params=dial(rec, listener, tag)),
                    Step("destroy", id_of="c", on="ESTABLISHED", on_id_of="c", wait_s=10.0),
                ),
            ),
        )
        connect, destroy = got.steps
        if not destroy.ran or destroy.event is None or connect.host_t_us is None:
            raise StepFailed(
                active.host,
                f"race calibration: no ESTABLISHED for {tag} (connect {connect.result}, "
                f"destroy {destroy.result})",
            )
        connects.append((tag, connect))
        took.append(destroy.event.host_t_us - connect.host_t_us - (connect.us or 0))
    listener.ep.collect(0.3)
    requests = [e for e in rec.events() if e.type == "CONNECT_REQUEST"]
    for tag, connect in connects:
        request = next((e for e in requests if e.private_bytes.startswith(tag.encode())), None)
        rec.label(tag, connect.id, request.id if request else None)

    def windows(tl: Timeline, clocks: int) -> list[Window]:
        return [_window(tl, tag, connect, clocks) for tag, connect in connects]

    return windows, int(statistics.median(took))


Window = tuple[int, int | None] | None


def _window(tl: Timeline, tag: str, connect: StepRun, clocks: int) -> Window:
    """When, after rdma_connect returned, a destroy would have been ``in_flight`` in
    this round: from the reply's sending plus the clocks' uncertainty to its delivery
    (µs; the end None when the destroy came first and no reply was delivered; None
    when the peer never sent one)."""
    if connect.t_us is None:
        return None
    mine = tl.events_of_conn(tag)
    reply = next((e for e in mine if e.id == connect.id and e.type == "ESTABLISHED"), None)
    sent = _sent(tl, mine)
    if sent is None:
        return None
    returned = connect.t_us + (connect.us or 0)
    return sent + clocks - returned, reply.t_us - returned if reply else None


def _sent(tl: Timeline, mine: list[Event]) -> int | None:
    """:func:`sent_us` of the round whose events are ``mine``."""
    accept, established = _passive(tl, mine)
    return sent_us(accept, established)


def _passive(tl: Timeline, mine: list[Event]) -> tuple[Action | None, Event | None]:
    """The passive side's accept and ESTABLISHED of the round whose events are ``mine``."""
    request = next((e for e in mine if e.type == "CONNECT_REQUEST"), None)
    if request is None:
        return None, None
    accept = next((x for x in tl.actions if x.id == request.id and x.name == "accept"), None)
    up = next((e for e in mine if e.id == request.id and e.type == "ESTABLISHED"), None)
    return accept, up


def _rounds(
    rec: Recording, active: Endpoint, listener: Listener, tags: list[str], delay_us: int
) -> ScenarioRun:
    script: list[Step] = []
    for i, tag in enumerate(tags):
        script.append(Step("connect", name=f"c{i}", params=dial(rec, listener, tag)))
        script.append(Step("destroy", id_of=f"c{i}", after_us=delay_us))
    bound = steps.waits(rec.session).destroy_s * len(tags)
    return run(active, Script(tuple(script), linger_s=LINGER_S, deadline_s=bound))


def _label(rec: Recording, asked: list[_Asked]) -> None:
    """Tie each round's two ids together under its tag (the passive one by private data)."""
    requests = [e for e in rec.events() if e.type == "CONNECT_REQUEST"]
    for a in asked:
        connect = a.run.steps[2 * a.index]
        request = next((e for e in requests if e.private_bytes.startswith(a.tag.encode())), None)
        rec.label(a.tag, connect.id, request.id if request else None)


def _classified(tl: Timeline, asked: list[_Asked]) -> tuple[core.Round, ...]:
    clocks = core.cross_host_uncertainty(tl)
    return tuple(_round(tl, a, clocks) for a in asked)


def _round(tl: Timeline, a: _Asked, clocks: int) -> core.Round:
    connect, destroy = a.run.steps[2 * a.index], a.run.steps[2 * a.index + 1]
    mine = tl.events_of_conn(a.tag)
    reply = next((e for e in mine if e.id == connect.id and e.type in steps.REPLY_TYPES), None)
    request = next((e for e in mine if e.type == "CONNECT_REQUEST"), None)
    accept, established = _passive(tl, mine)
    if not destroy.ran:
        order = core.UNCLEAR
        why = f"connect {connect.result}, destroy {destroy.result}: the round did not race"
    else:
        order, why = classify(destroy, reply, accept, clocks, established)
    ids = (connect.id, request.id if request else None)
    return core.Round(a.tag, a.offset_us, a.delay_us, order, why, ids, destroy.us)


RACE = core.register(
    core.Race(
        "destroy_reply",
        "destroy vs CONNECT_REPLY",
        ("rdma_destroy_id (active)", "rdma_accept (passive, auto)"),
        "CONNECT_REPLY",
        ORDERS,
        CERTAIN,
        sweep_destroy_vs_reply,
        FULL,
        AIMED,
    )
)
