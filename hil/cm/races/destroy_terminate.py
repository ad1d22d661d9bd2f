"""Race: the active side's ``rdma_destroy_id`` against an incoming TERMINATE.

Each round has its own established connection.  The active host's script
posts one RDMA WRITE with a wrong rkey (the peer's MR index with another
key byte, as ``remote_access_error`` does) without waiting for its
completion (the step's result is ETIMEDOUT: posted, not awaited): the peer
refuses it, sends a TERMINATE and closes.  The same script destroys the id
``delay`` after the post's time, so the destroy and the incoming TERMINATE
race on the active host.  The delays sweep a window around an aim: the delay
that fell inside the most ``in_flight`` windows measured so far (from the
peer's close plus the clocks' uncertainty to the active side's DISCONNECTED,
the TERMINATE's arrival as user space sees it; calibration rounds first,
then every ``terminate_first`` round), so delay 0 is ``destroy_first``, the
aim ``in_flight`` and the far end ``terminate_first``.  The peer's frames are
held back on the wire for the sweep (``Budget.hold_us``,
:mod:`hil.cm.races.hold`), which keeps its TERMINATE on its way that much
longer.

A round is classified from the stamps (:func:`classify`):

- ``terminate_first``: the active side's DISCONNECTED was delivered before
  the destroy began (one host's clock: exact);
- ``in_flight``: the peer had closed after its TERMINATE before the destroy
  began, and the active side had not delivered it (two hosts' clocks);
- ``destroy_first``: the destroy began before the peer closed (two hosts);
- ``unclear``: the two hosts' stamps are closer than the clocks' uncertainty.

The contract judges every round: no event for the destroyed id after its
destroy returned, one DISCONNECTED at most per side, nothing leaked.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import TYPE_CHECKING

import hil.cm.races.core as core
from hil.cm import steps
from hil.cm.clock import controller_us
from hil.cm.races.aim import aim, aim_windows, aimed_delay
from hil.cm.races.hold import HOLD_US, passive_held
from hil.cm.scenario import ScenarioRun, Script, Step, StepRun, run
from hil.judge.timeline import Event, Timeline

if TYPE_CHECKING:
    from hil.cm.endpoint import Endpoint
    from hil.cm.recording import Recording
    from hil.cm.sides import PairSides
    from hil.cm.steps import Conn, Listener

ORDERS = ("destroy_first", "in_flight", "terminate_first")
# terminate_first is read on one clock; the other two compare the peer's close with the
# destroy across the hosts (+/- 0.3-0.6 ms with the host-to-host clock).  Delays run from 0
# (destroy_first) past the aim (in_flight, a 1-9 ms window) to the aim + the budget's
# window (terminate_first): docs/races.md, "destroy vs an incoming TERMINATE".
CERTAIN = ("destroy_first", "terminate_first")
AIMED = ("in_flight",)  # a bounded sweep with both outer orders spends its rest at the aim
CALIBRATION_ROUNDS = 2
ROUND_US = 100_000  # between two rounds' writes, past the window
START_US = 200_000  # the first write: past the script's trip to its host (10-100 ms)
POSTED_ONLY_S = 0.0  # a racing WRITE's wait: post it, do not poll its completion
FULL = core.Budget(8_000, 250, rounds=1, hold_us=HOLD_US)


@dataclass(frozen=True)
class _Asked:
    conn: Conn
    offset_us: int
    delay_us: int
    write: StepRun
    destroy: StepRun


def classify(
    destroy: StepRun, mine: Event | None, peers: Event | None, uncertainty_us: int
) -> tuple[str, str]:
    """The order of a destroy and an incoming TERMINATE: ``mine`` is the destroying
    side's DISCONNECTED, ``peers`` the peer's (see the module)."""
    if destroy.t_us is None or destroy.host_t_us is None:
        return core.UNCLEAR, f"the destroy did not run ({destroy.result})"
    if mine is not None and mine.host_t_us < destroy.host_t_us:
        return "terminate_first", f"DISCONNECTED {destroy.host_t_us - mine.host_t_us} µs before"
    clocks = f"clocks +/- {uncertainty_us} µs"
    if peers is None:
        return "destroy_first", "the peer never closed"
    if destroy.t_us - peers.t_us > uncertainty_us:
        return "in_flight", f"the peer closed {destroy.t_us - peers.t_us} µs before ({clocks})"
    if peers.t_us - destroy.t_us > uncertainty_us:
        return "destroy_first", f"the peer closed {peers.t_us - destroy.t_us} µs after ({clocks})"
    return core.UNCLEAR, f"the peer closed {peers.t_us - destroy.t_us:+d} µs from it, {clocks}"


def sweep_destroy_vs_terminate(
    s: PairSides, budget: core.Budget = FULL, wanted: tuple[str, ...] = ORDERS
) -> core.RaceSweep:
    """Sweep the destroy over the budget's window around the aim (see the module); the
    window's low end, and any delay below 0, runs at 0: at the post's time (``aimed_delay``)."""
    with s.recording("race-destroy-vs-terminate") as rec, passive_held(s, rec, budget):
        listener = steps.listen(rec, s.passive, backlog=16)
        active = rec.endpoint(s.active)
        calibration = _calibrate(rec, active, listener)
        asked: list[_Asked] = []
        aims: list[int] = []

        def batch(offset: int, n: int) -> None:
            tl = rec.timeline()
            clocks = core.cross_host_uncertainty(tl)
            calibrated = [w for c, write in calibration if (w := _window(tl, c, write, clocks))]
            measured = [w for a in asked if (w := _window(tl, a.conn, a.write, clocks))]
            aims.append(aim(aim_windows(calibrated, measured)) or _latency(tl, calibration))
            delay = aimed_delay(budget, aims[-1], offset)
            asked.extend(_rounds(rec, active, listener, len(asked), offset, delay, n))

        early = core.drive(budget, wanted, batch, lambda: _classified(rec.timeline(), asked), AIMED)
        steps.destroy(listener.ep, listener.id)
    tl = rec.timeline()
    spread_of = f"{min(aims) / 1e3:.1f}-{max(aims) / 1e3:.1f}" if aims else "-"
    return core.RaceSweep(
        RACE, _classified(tl, asked), wanted, core.cross_host_uncertainty(tl), tl,
        f"an aim of {spread_of} ms after the post (peer closed, not delivered)", early,
    )  # fmt: skip


def _down(tl: Timeline, conn: Conn, cm_id: str) -> Event | None:
    """The DISCONNECTED of ``cm_id`` (one of ``conn``'s two ids), if it came."""
    return next(
        (e for e in tl.events_of_conn(conn.label) if e.id == cm_id and e.type == "DISCONNECTED"),
        None,
    )


def _window(tl: Timeline, conn: Conn, write: StepRun, clocks: int) -> tuple[int, int | None] | None:
    """When, after the post, a destroy would have been ``in_flight`` in this round: from
    the peer's close plus the clocks' uncertainty to the active side's DISCONNECTED (µs;
    the end None when the destroy came first and none was delivered; None when the peer
    never closed or the post never ran)."""
    mine, peers = _down(tl, conn, conn.active_id), _down(tl, conn, conn.passive_id)
    if peers is None or write.t_us is None:
        return None
    return peers.t_us + clocks - write.t_us, mine.t_us - write.t_us if mine else None


def _latency(tl: Timeline, calibration: list[tuple[Conn, StepRun]]) -> int:
    """The calibration rounds' median time from the post to the active side's
    DISCONNECTED (the aim when no window is known)."""
    took = []
    for conn, write in calibration:
        mine = _down(tl, conn, conn.active_id)
        if mine is not None and write.t_us is not None:
            took.append(mine.t_us - write.t_us)
    return int(statistics.median(took)) if took else 0


def _bad_write(conn: Conn) -> dict[str, object]:
    # The peer's MR index with another key byte (an STag is index << 8 | key): no MR takes it.
    peer = conn.passive_qp
    remote = {"addr": peer["addr"], "rkey": peer["rkey"] ^ 0xFF}
    return {"remote": remote, "length": 64, "wait": POSTED_ONLY_S}


def _connect(
    rec: Recording, active: Endpoint, listener: Listener, first: int, n: int
) -> list[Conn]:
    return [steps.establish(rec, active, listener, f"hil-race-{first + i:04d}") for i in range(n)]


def _calibrate(rec: Recording, active: Endpoint, listener: Listener) -> list[tuple[Conn, StepRun]]:
    """Calibration rounds (post, destroy on the DISCONNECTED): each round's connection
    and post, for :func:`_window` once the passive side's close is in."""
    took = []
    for conn in _connect(rec, active, listener, 9000, CALIBRATION_ROUNDS):
        steps.payload(conn)  # the rounds' connections carry none: docs/payload.md
        got = run(
            active,
            Script(
                (
                    Step("write", cm_id=conn.active_id, name="w", params=_bad_write(conn)),
                    Step("destroy", id_of="w", on="DISCONNECTED", on_id_of="w", wait_s=10.0),
                )
            ),
        )
        write, destroy = got.steps
        if destroy.event is None or write.host_t_us is None:
            raise steps.StepFailed(
                active.host,
                f"race calibration: no DISCONNECTED after a refused WRITE on {conn.label} "
                f"(write {write.result}, destroy {destroy.result})",
            )
        _finish(rec, conn)
        took.append((conn, write))
    return took


def _rounds(
    rec: Recording,
    active: Endpoint,
    listener: Listener,
    first: int,
    offset: int,
    delay: int,
    n: int,
) -> list[_Asked]:
    conns = _connect(rec, active, listener, first, n)
    start = controller_us() + START_US
    script: list[Step] = []
    for i, conn in enumerate(conns):
        at = start + i * (ROUND_US + delay)
        script.append(Step("write", cm_id=conn.active_id, params=_bad_write(conn), at_us=at))
        # From the post's time, not its return: posting takes 1-6 ms on the TCG lab.
        script.append(Step("destroy", cm_id=conn.active_id, at_us=at + delay))
    deadline = (n * (ROUND_US + delay) + 2 * START_US) / 1e6 + 5
    got: ScenarioRun = run(active, Script(tuple(script), deadline_s=deadline))
    for conn in conns:
        _finish(rec, conn)
    return [
        _Asked(c, offset, delay, got.steps[2 * i], got.steps[2 * i + 1])
        for i, c in enumerate(conns)
    ]


def _finish(rec: Recording, conn: Conn) -> None:
    """The passive side's close of a round, then its id destroyed."""
    conn.passive.wait("DISCONNECTED", conn.passive_id, steps.waits(rec.session).close_s)
    steps.destroy(conn.passive, conn.passive_id)
    steps.destroy(conn.active, conn.active_id)


def _classified(tl: Timeline, asked: list[_Asked]) -> tuple[core.Round, ...]:
    clocks = core.cross_host_uncertainty(tl)
    done = []
    for a in asked:
        mine, peers = _down(tl, a.conn, a.conn.active_id), _down(tl, a.conn, a.conn.passive_id)
        order, why = classify(a.destroy, mine, peers, clocks)
        ids = (a.conn.active_id, a.conn.passive_id)
        done.append(
            core.Round(a.conn.label, a.offset_us, a.delay_us, order, why, ids, a.destroy.us)
        )
    return tuple(done)


RACE = core.register(
    core.Race(
        "destroy_terminate",
        "destroy vs an incoming TERMINATE",
        ("rdma_destroy_id (active)", "the peer's TERMINATE for a refused WRITE"),
        "DISCONNECTED",
        ORDERS,
        CERTAIN,
        sweep_destroy_vs_terminate,
        FULL,
        AIMED,
    )
)
