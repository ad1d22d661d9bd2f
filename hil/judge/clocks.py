"""How a host's stamps map onto the controller's time base, and how well.

A :class:`ClockOffset` per host (measured over the controller's channel), a
:class:`RelativeClock` between the two hosts (measured over their data
link: far tighter), and :class:`WallSample` pairs that map a capture's
wall-clock stamps onto a host's monotonic clock.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ClockOffset:
    """``controller_time = host_time + offset_us``, known to +/- ``uncertainty_us``.

    Measured over the controller's channel to the host (half an SSH round
    trip: milliseconds on a TCG guest), or derived from the other host's
    offset and a :class:`RelativeClock` (their uncertainties add up).
    """

    host: str
    offset_us: int
    uncertainty_us: int


@dataclass(frozen=True)
class RelativeClock:
    """``time_on_host_a = time_on_host_b + offset_us``, known to +/- ``uncertainty_us``.

    Measured between the two hosts themselves (stamped probes over their data
    link, ``hil.cm.clock.relative``): far tighter than either host's offset to
    the controller.  Which of two events on the two hosts came first depends
    only on this: a shift both hosts share against the controller changes no
    such order.  :meth:`Timeline.uncertainty_us` uses it when the timeline's
    two offsets agree with it (B's offset derived from A's through it).
    """

    host_a: str
    host_b: str
    offset_us: int
    uncertainty_us: int

    def agrees(self, a: ClockOffset, b: ClockOffset) -> bool:
        """True when ``b``'s offset is ``a``'s through this clock (to 1 µs of rounding)."""
        if (a.host, b.host) != (self.host_a, self.host_b):
            return False
        return abs(b.offset_us - (a.offset_us + self.offset_us)) <= 1


@dataclass(frozen=True)
class WallSample:
    """A host's CLOCK_REALTIME and CLOCK_MONOTONIC at one instant (µs): ``wall_us`` was
    read at host monotonic time ``mono_us`` +/- ``spread_us``.

    Two of them around a capture map its packets' wall-clock stamps onto the
    host's monotonic clock, and with the host's :class:`ClockOffset` onto the
    timeline's time base.
    """

    host: str
    wall_us: int
    mono_us: int
    spread_us: int
