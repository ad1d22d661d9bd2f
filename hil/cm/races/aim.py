"""Where a race's sweep aims its narrow middle order: the delay inside the most windows.

A race whose middle order lives in a window that moves from round to round
(a reply sent but not delivered: destroy_reply; a peer's close not yet
delivered: destroy_terminate) measures that window in every round, and
aims each batch's delays at the delay that would have fallen inside it in
the most rounds so far (:func:`aim`, over :func:`aim_windows`);
:func:`aimed_delay` puts a budget's offset around that aim.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from hil.cm.races.core import Budget

OPEN_WIDTH_US = 1_000  # an open window's width when no round closed one yet


def aim(windows: Sequence[tuple[int, int | None]]) -> int | None:
    """The middle of the stretch at or after 0 that lies inside the most ``(begin, end)``
    windows (the earliest such stretch; empty windows, and the part of a window before 0,
    which no delay reaches, count for nothing), None without one.

    A race whose middle order lives in a narrow window that moves from round to
    round (a reply sent but not yet delivered) aims its delays here: the delay
    that would have fallen inside that window in the most rounds measured so far.
    A round whose destroy came first shows only the window's begin (``end`` None):
    it counts as wide as the median closed window (``OPEN_WIDTH_US`` without one), so
    the aim follows the lab when it slows down and every round ends up destroy_first."""
    widths = [e - b for b, e in windows if e is not None and e > b]
    width = int(statistics.median(widths)) if widths else OPEN_WIDTH_US
    # A delay is never below 0 (aimed_delay): the part of a window before 0 cannot be hit.
    closed = [(max(b, 0), b + width if e is None else e) for b, e in windows]
    edges = sorted(
        [(b, 1) for b, e in closed if e > b] + [(e, -1) for b, e in closed if e > b],
        key=lambda edge: (edge[0], edge[1]),  # an end before a begin at the same time
    )
    best, inside, at = 0, 0, None
    for i, (t, step) in enumerate(edges):
        inside += step
        if step > 0 and inside > best:
            best, at = inside, (t + edges[i + 1][0]) // 2
    return at


AIM_ROUNDS = 3  # rounds whose window closed: from then on the aim is theirs alone


def aim_windows(
    calibration: Sequence[tuple[int, int | None]], rounds: Sequence[tuple[int, int | None]]
) -> list[tuple[int, int | None]]:
    """The windows to :func:`aim` at: the sweep's own closed ones once ``AIM_ROUNDS`` of
    its rounds closed one (a calibration round is a new endpoint's first connects, slower;
    a round whose destroy came first may have slowed its peer), else every one so far."""
    closed = [w for w in rounds if w[1] is not None]
    return closed if len(closed) >= AIM_ROUNDS else [*calibration, *rounds]


def aimed_delay(budget: Budget, aim_us: int, offset_us: int) -> int:
    """The delay a round at ``offset_us`` asks for around ``aim_us``: the window's low end
    runs at 0 (right after the cause, however late the aim lies: a race's first order),
    the rest at the aim plus the offset, never below 0."""
    if offset_us <= -budget.window_us:
        return 0
    return max(0, aim_us + offset_us)
