"""Clocks: a host-to-host clock agrees with two offsets only when one is the other through it."""

from __future__ import annotations

from hil.judge.clocks import ClockOffset, RelativeClock


def test_a_relative_clock_agrees_with_offsets_derived_through_it() -> None:
    rc = RelativeClock("h-a", "h-b", offset_us=-700, uncertainty_us=40)
    a = ClockOffset("h-a", offset_us=10_000, uncertainty_us=3_000)
    assert rc.agrees(a, ClockOffset("h-b", 9_300, 3_040))
    assert rc.agrees(a, ClockOffset("h-b", 9_301, 3_040))  # a microsecond of rounding
    assert not rc.agrees(a, ClockOffset("h-b", 9_310, 3_040))  # measured apart
    assert not rc.agrees(ClockOffset("h-b", 9_300, 3_040), a)  # the hosts the other way
