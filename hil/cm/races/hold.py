"""A sweep's egress hold: the passive host's frames held back on the wire while it runs.

destroy_reply's and destroy_terminate's middle order (``in_flight``) lives
while the passive side's frame (the MPA reply, the TERMINATE) is on its way
to the destroying host.  Unheld, that is 0.5-5 ms on the TCG lab, moving by
milliseconds from round to round, and the hosts' clocks (+/- 0.3-0.5 ms)
make most rounds near it ``unclear``: a CI run (2026-12-03) had no round in it
in 100.  Held back ``Budget.hold_us`` by netem (:mod:`hil.host.netdelay`),
the frame stays on the wire that long, so the window is at least that wide.
The orders are still read from the stamps, never from the hold; the rounds
at the window's far end still meet the frame while it is being delivered.
The hold is the timeline's action ``hold_egress``: a capture sees the held
host's frames only once the hold let them go, and the wire rules allow for
that (:meth:`hil.wire.rule.WireCase.slack_us`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from hil.cm.clock import controller_us
from hil.errors import InputError
from hil.host.netdelay import held_egress
from hil.judge.timeline import HOLD_EGRESS

if TYPE_CHECKING:
    from hil.cm.races.core import Budget
    from hil.cm.recording import Recording
    from hil.cm.sides import PairSides

# Both races' hold: well past the hosts' clocks and the window's own jitter on the TCG
# lab, short beside their 8-16 ms sweeps.  Measured on an idle lab (docs/notes/race-holds.md):
# the full sweeps' in_flight went from 1 and 2 of 65 rounds unheld to 4 and 10 at 3 ms; in
# the suite budget's aimed rounds 2-3 of 8 at 3 ms, 5-6 of 8 at 6 ms.
HOLD_US = 6_000


@contextmanager
def passive_held(s: PairSides, rec: Recording, budget: Budget) -> Iterator[None]:
    """Hold the passive host's frames on its data netdev back ``budget.hold_us`` inside
    the block (nothing when it is 0), recorded as its action ``hold_egress`` (the wire
    rules allow for it: a capture sees the held frames that much later)."""
    if not budget.hold_us:
        yield
        return
    if s.journal is None:
        raise InputError(
            "a race's egress hold changes a host's qdisc: it needs a restore journal "
            "(journal= to CMSession), or a budget with hold_us=0"
        )
    side, start = s.passive, controller_us()
    netdev = s.rnic(side).netdev
    with held_egress(s.agent(side), s.journal, s.host(side), netdev, budget.hold_us):
        rec.controller_action(
            side, HOLD_EGRESS, start, netdev=netdev, address=s.address(side),
            delay_us=budget.hold_us,
        )  # fmt: skip
        yield
