"""Race: each side's ``rdma_disconnect`` against the peer's, on one connection.

Each round has its own connection (both ids ESTABLISHED, made by a script
on the active host, :mod:`hil.cm.races.conns`).  Both hosts then run one
script each, started together (:func:`hil.cm.scenario.together`): the active
side disconnects round ``i``'s id at ``T + i * spacing``, the passive side
``offset`` later (earlier when negative), each host's time computed from its
measured clock offset.

A round is classified by what each host saw, on its own clock (exact: no
cross-host comparison is needed, :func:`classify`):

- ``active_first``: the passive side's DISCONNECTED (the active side's close
  arriving) was delivered before its own rdma_disconnect began;
- ``passive_first``: the same the other way round;
- ``crossed``: each side called rdma_disconnect before it had seen a
  DISCONNECTED: the two closes crossed on the wire;
- ``unclear``: a disconnect did not run, or both saw DISCONNECTED first.

How far apart the two calls really were (``apart``) is in each round's
``why``, good to the clocks' uncertainty.  The contract judges every round:
both calls return 0 (rdma_disconnect is idempotent), one DISCONNECTED per
side.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import hil.cm.races.core as core
from hil.cm import steps
from hil.cm.clock import controller_us
from hil.cm.races.conns import Pair, connect_all
from hil.cm.scenario import LEAD_S, ScenarioRun, Script, Step, StepRun, together
from hil.judge.timeline import Event, Timeline

if TYPE_CHECKING:
    from hil.cm.endpoint import Endpoint
    from hil.cm.sides import PairSides

ORDERS = ("active_first", "crossed", "passive_first")
CERTAIN = ORDERS  # each order is read on one host's clock: certain whatever the offsets
GAP_US = 40_000  # between two rounds beyond the window: one round's close is over by then
START_MARGIN_US = 100_000
FULL = core.Budget(20_000, 1_000, rounds=2)


@dataclass(frozen=True)
class _Asked:
    pair: Pair
    offset_us: int
    active: StepRun
    passive: StepRun


def classify(
    active: StepRun, passive: StepRun, active_down: Event | None, passive_down: Event | None
) -> tuple[str, str]:
    """The order of two rdma_disconnects on one connection, each host's view on its clock."""
    if active.host_t_us is None or passive.host_t_us is None:
        return core.UNCLEAR, f"disconnects: active {active.result}, passive {passive.result}"
    a_saw = active_down is not None and active_down.host_t_us < active.host_t_us
    p_saw = passive_down is not None and passive_down.host_t_us < passive.host_t_us
    if a_saw and p_saw:
        return core.UNCLEAR, "both sides saw DISCONNECTED before they called rdma_disconnect"
    if p_saw:
        assert passive_down is not None
        ahead = passive.host_t_us - passive_down.host_t_us
        return "active_first", f"passive DISCONNECTED {ahead} µs before its rdma_disconnect"
    if a_saw:
        assert active_down is not None
        ahead = active.host_t_us - active_down.host_t_us
        return "passive_first", f"active DISCONNECTED {ahead} µs before its rdma_disconnect"
    return "crossed", "each side called rdma_disconnect before it saw a DISCONNECTED"


def sweep_disconnects(
    s: PairSides, budget: core.Budget = FULL, wanted: tuple[str, ...] = ORDERS
) -> core.RaceSweep:
    """Sweep the passive side's rdma_disconnect over the budget's window around the
    active side's, one connection per round."""
    with s.recording("race-disconnect-vs-disconnect") as rec:
        listener = steps.listen(rec, s.passive, auto="accept", backlog=16)
        active = rec.endpoint(s.active)
        asked: list[_Asked] = []
        spacing = 2 * budget.window_us + GAP_US

        def batch(offset: int, n: int) -> None:
            tags = [f"hil-race-{len(asked) + i:04d}" for i in range(n)]
            pairs = connect_all(rec, active, listener, tags)
            ra, rp = _disconnect(active, listener.ep, pairs, offset, spacing)
            asked.extend(
                _Asked(p, offset, a, b) for p, a, b in zip(pairs, ra.steps, rp.steps, strict=True)
            )
            for p in pairs:  # both closes over before the ids go
                active.wait("DISCONNECTED", p.active_id, steps.waits(s).close_s)
                listener.ep.wait("DISCONNECTED", p.passive_id, steps.waits(s).close_s)
                steps.destroy(active, p.active_id)
                steps.destroy(listener.ep, p.passive_id)

        early = core.drive(budget, wanted, batch, lambda: _classified(rec.timeline(), asked))
        steps.destroy(listener.ep, listener.id)
    tl = rec.timeline()
    return core.RaceSweep(
        RACE, _classified(tl, asked), wanted, core.cross_host_uncertainty(tl), tl,
        "the active side's rdma_disconnect", early,
    )  # fmt: skip


def _disconnect(
    active: Endpoint, passive: Endpoint, pairs: list[Pair], offset: int, spacing: int
) -> tuple[ScenarioRun, ScenarioRun]:
    """Both sides' disconnects of every pair, round ``i`` at ``T + i * spacing``."""
    # Past together()'s common start (its lead), so that no step runs late for it.
    start = controller_us() + int(LEAD_S * 1e6) + START_MARGIN_US + max(0, -offset)
    at = [start + i * spacing for i in range(len(pairs))]
    a = Script(
        tuple(Step("disconnect", cm_id=p.active_id, at_us=at[i]) for i, p in enumerate(pairs))
    )
    b = Script(
        tuple(
            Step("disconnect", cm_id=p.passive_id, at_us=at[i] + offset)
            for i, p in enumerate(pairs)
        )
    )
    ra, rb = together([(active, a, 0), (passive, b, 0)])
    return ra, rb


def _classified(tl: Timeline, asked: list[_Asked]) -> tuple[core.Round, ...]:
    clocks = core.cross_host_uncertainty(tl)
    return tuple(_round(tl, a, clocks) for a in asked)


def _round(tl: Timeline, a: _Asked, clocks: int) -> core.Round:
    mine = tl.events_of_conn(a.pair.tag)

    def down(cm_id: str) -> Event | None:
        return next((e for e in mine if e.id == cm_id and e.type == "DISCONNECTED"), None)

    order, why = classify(a.active, a.passive, down(a.pair.active_id), down(a.pair.passive_id))
    if a.active.t_us is not None and a.passive.t_us is not None:
        why += f"; passive called {a.passive.t_us - a.active.t_us:+d} µs +/- {clocks} µs"
    ids = (a.pair.active_id, a.pair.passive_id)
    return core.Round(a.pair.tag, a.offset_us, a.offset_us, order, why, ids, a.passive.us)


RACE = core.register(
    core.Race(
        "disconnects",
        "disconnect vs the peer's disconnect",
        ("rdma_disconnect (active)", "rdma_disconnect (passive)"),
        "DISCONNECTED",
        ORDERS,
        CERTAIN,
        sweep_disconnects,
        FULL,
    )
)
