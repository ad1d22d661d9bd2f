"""rdma_ucm regressions: the ucma file closed while the CM still works on one of its ids.

- ``regress_ucma_close_during_resolve_route`` covers syzbot
  a2e2735f09ebb9d95bd1 (February 2024, "KASAN: slab-use-after-free Read in
  rdma_resolve_route"): ucma_close freed an id while rdma_resolve_route
  still used it.  That report's path (cma_add_id_to_tree) is RoCE's; on
  iWARP the same window is ucma_close destroying an id whose route work
  cma_resolve_iw_route has just queued.  Rounds on the active host close
  the event channel's fd a swept 0-5000 µs after rdma_resolve_route
  returned, the route's event unread: ucma_close destroys an id just past
  its route query and cleans up its unreported event.

On the lab's one-vCPU guests the route's work has always run by the time
rdma_resolve_route returns to user space (the woken kworker runs first), so
a close while it is still queued needs more CPUs: the sequence counts those
rounds (``closed_with_route_pending``) but asks only for a close right after
rdma_resolve_route's return, its event unread: within 100 µs, or within a
quarter of the call's own time where that is longer (on the debug kernel under
TCG the quickest closes came 133-158 µs after the return, the call itself
took 0.4-6 ms; 2026-12-01).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hil.agent import protocol as wire
from hil.agent.client import request
from hil.cm.registry import sequence
from hil.cm.regressions.evidence import note
from hil.errors import InputError
from hil.judge.timeline import Action, Timeline

if TYPE_CHECKING:
    from hil.cm.sides import PairSides

DELAYS_US = (0, 0, 0, 0, 20, 50, 100, 200, 500, 1000, 2000, 5000)
PROMPT_US = 100  # a close this soon after rdma_resolve_route returned is "right after" it


def right_after(r: wire.CloseRound) -> bool:
    """Whether round ``r`` closed right after rdma_resolve_route returned: within
    :data:`PROMPT_US`, or a quarter of the call's own time on a kernel where calls
    are that slow (a debug kernel's, where no close can follow within 100 µs)."""
    return r["close_after_us"] <= max(PROMPT_US, r["route_us"] // 4)


@sequence
def regress_ucma_close_during_resolve_route(s: PairSides, sweeps: int = 2) -> Timeline:
    """syzbot a2e2735f09ebb9d95bd1: the ucma file closed right after rdma_resolve_route."""
    if not 1 <= sweeps <= 10:
        raise InputError("sweeps 1..10, please")
    with s.recording("regress-ucma-close-during-resolve-route") as rec:
        params = wire.CloseRaceParams(
            dst=s.address(s.passive),
            port=s.port(),
            src=s.address(s.active),
            delays_us=list(DELAYS_US) * sweeps,
        )
        got = request(s.agent(s.active), wire.CM_CLOSE_RACE, params, 30.0 + 2 * sweeps)
        offset = s.offset(s.active).offset_us
        for i, r in enumerate(got["rounds"]):
            rec.add_action(
                Action(
                    offset + r["t_us"],
                    s.active,
                    "close_channel",
                    None,
                    {"round": i, **r},
                    "ok",
                )
            )
        pending = sum(1 for r in got["rounds"] if not r["queued"])
        rec.metric("closed_with_route_pending", float(pending))
        rec.metric("closed_with_event_queued", float(len(got["rounds"]) - pending))
        within = [r for r in got["rounds"] if r["close_after_us"] <= PROMPT_US]
        rec.metric("closed_within_100us", float(len(within)))
        prompt = [r for r in got["rounds"] if right_after(r)]
        rec.metric("closed_right_after", float(len(prompt)))
        note(rec, "a_close_right_after_resolve_route", bool(prompt))
    return rec.timeline()
