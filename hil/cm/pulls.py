"""A link pull that proves itself, for the sequences that pull the pair's link.

``with pulled(rec, lc, link, mode, side, kind, traffic, hold_s) as start:``
pulls ``link`` in ``mode`` (a ``pull`` action on ``side``), runs the block
(at most ``hold_s`` seconds), samples both ends while the link is still
pulled, restores it (a ``restore`` action) and samples them again: each
sample a ``link_state`` action (``phase`` ``pulled`` / ``restored``, ``ends``:
:class:`hil.host.linkctl.EndState` of each end).  Where the pulled host's
profile says what its RDMA port shows in ``mode``, its async verbs events are
watched from before the pull until after the restore
(:class:`hil.cm.asyncwatch.AsyncWatch`).  The rules of
:mod:`hil.judge.pullproof` judge all of it.  The restore runs also when the
block fails.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import TYPE_CHECKING

from hil.cm import asyncwatch
from hil.cm.asyncwatch import AsyncWatch
from hil.cm.clock import controller_us
from hil.host.linkctl import CARRIER_TIMEOUT, STEP_TIMEOUT
from hil.judge.pullproof import down

if TYPE_CHECKING:
    from hil.cm.recording import Recording
    from hil.host.linkctl import LinkControl
    from hil.inventory.model import Link

WATCH_MARGIN_S = 2.0  # a pull's async watch outlasts what it watches by this
SAMPLE_S = 5.0  # at most, for a pulled link to show down (or a restored one up)


@contextmanager
def pulled(
    rec: Recording,
    lc: LinkControl,
    link: Link,
    mode: str,
    side: str,
    traffic: bool,
    hold_s: float,
) -> Iterator[int]:
    """Pull ``link`` for the block, proved and restored (module docstring); yields the
    controller time the pull began."""
    kind = "admin" if mode == "admin" else "carrier"  # the host sees its link go down, or not
    with _port_watch(rec, side, mode, hold_s):
        start = controller_us()
        lc.pull(link, mode)
        rec.controller_action(side, "pull", start, mode=kind, method=mode, traffic=traffic)
        try:
            yield start
            _sample(rec, lc, link, side, "pulled")
        finally:
            restored = controller_us()
            lc.restore(link, mode)
            rec.controller_action(side, "restore", restored, mode=kind, method=mode)
        _sample(rec, lc, link, side, "restored")


def _sample(rec: Recording, lc: LinkControl, link: Link, side: str, phase: str) -> None:
    """Record both ends of ``link`` as their hosts see them, polled until the link shows
    down (``pulled``) or up again (``restored``), at most SAMPLE_S: a carrier change
    reaches the guest's netdev after the pull returned."""
    start, deadline = controller_us(), time.monotonic() + SAMPLE_S
    while True:
        state = lc.state(link)
        downs = [down(vars(e)) for e in (state.a, state.b)]
        if any(downs) == (phase == "pulled") or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    ends = [vars(state.a), vars(state.b)]
    rec.controller_action(side, "link_state", start, phase=phase, ends=ends)


def _port_watch(
    rec: Recording, side: str, mode: str, hold_s: float
) -> AbstractContextManager[object]:
    """Watch the pulled host's async events when its profile says what its port shows in
    ``mode``, else nothing."""
    if rec.session.profile.of(rec.session.host(side)).port_promise(mode) is None:
        return nullcontext()
    restore_s = CARRIER_TIMEOUT + STEP_TIMEOUT  # an admin restore waits for carrier
    seconds = asyncwatch.OPEN_S + hold_s + 2 * SAMPLE_S + restore_s + WATCH_MARGIN_S
    return AsyncWatch(rec, side, seconds)
