"""Capture timestamps onto the timeline's time base, with a stated uncertainty.

A packet's capture timestamp is the capturing host's CLOCK_REALTIME
(``wall_us``); the timeline runs on the controller's CLOCK_MONOTONIC.  Two
steps take one to the other:

1. wall to the host's own CLOCK_MONOTONIC: the agent reads both clocks
   together (a :class:`~hil.judge.timeline.WallSample`, from
   :func:`hil.cm.clock.wall_sample`: ``mono_us - wall_us``, read within
   ``spread_us``), once before the capture starts and once after it stops;
   the mean of the two differences is used;
2. host monotonic to the controller's: the host's ``ClockOffset``
   (:func:`hil.cm.clock.estimate`), ``controller = host + offset_us``.

So ``t_us = wall_us + shift_us`` with ``shift_us = offset_us + mean(mono -
wall)``, good to ``uncertainty_us = offset uncertainty + the larger spread
+ |the change of (mono - wall) between the samples|``: the last term is what
the wall clock moved against the monotonic one during the capture (NTP
slewing or stepping it), which a packet anywhere in the capture may carry.  A step (a
second or more) is also said in the placement's notes, since it makes the uncertainty
that large.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from hil.errors import InputError
from hil.judge.timeline import ClockOffset, WallSample
from hil.wire.model import Exchange

# A wall clock that moved this far against the monotonic one during a capture was stepped
# (``date -s``, an NTP step), not slewed (at most 500 ppm: 0.5 ms a second): said in a note.
STEP_US = 1_000_000


@dataclass(frozen=True)
class Placement:
    """Per capture point: the shift onto the timeline and its uncertainty (µs); notes say
    which points could not be placed, and why."""

    shift_us: dict[str, int]
    uncertainty_us: dict[str, int]
    notes: tuple[str, ...] = ()

    def apply(self, exchange: Exchange) -> Exchange:
        """``exchange`` with every placed point's packets given ``t_us``, and these notes."""
        placed = exchange.placed(self.shift_us, self.uncertainty_us)
        return replace(placed, notes=placed.notes + self.notes)


def point_shift(before: WallSample, after: WallSample, offset: ClockOffset) -> tuple[int, int]:
    """``(shift_us, uncertainty_us)`` of a capture on ``offset.host`` sampled ``before`` and
    ``after``; InputError when the three are not of one host."""
    hosts = {before.host, after.host, offset.host}
    if len(hosts) != 1:
        raise InputError(f"clock samples and offset of different hosts: {', '.join(sorted(hosts))}")
    d0 = before.mono_us - before.wall_us
    d1 = after.mono_us - after.wall_us
    shift = offset.offset_us + round((d0 + d1) / 2)
    uncertainty = offset.uncertainty_us + max(before.spread_us, after.spread_us) + abs(d1 - d0)
    return shift, uncertainty


def place(
    samples: Mapping[str, tuple[WallSample | None, WallSample | None]],
    offsets: Iterable[ClockOffset],
) -> Placement:
    """The placement of each capture point from its (before, after) samples and its host's
    offset; a point missing either is left unplaced, with a note."""
    by_host = {o.host: o for o in offsets}
    shift: dict[str, int] = {}
    uncertainty: dict[str, int] = {}
    notes = []
    for point, (before, after) in samples.items():
        if before is None or after is None:
            which = "before the capture" if before is None else "after it"
            notes.append(f"{point}: not placed on the timeline: no clock sample {which}")
            continue
        offset = by_host.get(before.host)
        if offset is None:
            notes.append(
                f"{point}: not placed on the timeline: no clock offset of host {before.host}"
            )
            continue
        shift[point], uncertainty[point] = point_shift(before, after, offset)
        step = stepped_us(before, after)
        if step is not None:
            notes.append(
                f"{point}: {before.host}'s wall clock was stepped by {step / 1e6:+.1f} s during "
                f"the capture; its packets are placed to within {uncertainty[point] / 1e6:.1f} s"
            )
    return Placement(shift, uncertainty, tuple(notes))


def stepped_us(before: WallSample, after: WallSample) -> int | None:
    """How far the host's wall clock moved against its monotonic clock between the two
    samples (µs, + when set forward), when that is a step (``STEP_US`` or more); else None."""
    moved = (after.wall_us - after.mono_us) - (before.wall_us - before.mono_us)
    return moved if abs(moved) >= STEP_US else None
