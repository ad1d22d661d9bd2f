"""Capture timestamps onto the timeline: the arithmetic of hil.wire.clock."""

from __future__ import annotations

import pytest

from hil.errors import InputError
from hil.judge.timeline import ClockOffset
from hil.judge.timeline import WallSample as Sample
from hil.wire.clock import Placement, place, point_shift
from hil.wire.model import Connection, Exchange, Packet

OFFSET = ClockOffset("a", offset_us=5_000, uncertainty_us=40)


def test_shift_is_the_offset_plus_the_mean_monotonic_minus_wall() -> None:
    # mono - wall: -1_000_000 before, -1_000_010 after (the wall clock ran 10 µs fast).
    before = Sample("a", wall_us=2_000_000, mono_us=1_000_000, spread_us=3)
    after = Sample("a", wall_us=2_500_010, mono_us=1_500_000, spread_us=7)
    shift, uncertainty = point_shift(before, after, OFFSET)
    assert shift == 5_000 - 1_000_005
    # offset 40, the larger spread 7, the 10 µs the clocks moved apart
    assert uncertainty == 40 + 7 + 10
    # A packet stamped at wall 2_200_000 was at host monotonic ~1_199_995, controller ~1_204_995.
    assert 2_200_000 + shift == 1_204_995


def test_samples_of_another_host_are_refused() -> None:
    before = Sample("a", 2, 1, 0)
    with pytest.raises(InputError, match="different hosts: a, b"):
        point_shift(before, Sample("b", 2, 1, 0), OFFSET)


def test_place_notes_the_points_it_cannot_place() -> None:
    a = (Sample("a", 10, 0, 1), Sample("a", 20, 10, 1))
    placement = place(
        {
            "a": a,
            "b": (Sample("b", 10, 0, 1), Sample("b", 20, 10, 1)),  # no offset of b
            "c": (None, Sample("c", 20, 10, 1)),  # no sample before
            "d": (Sample("d", 10, 0, 1), None),
        },
        [OFFSET],
    )
    assert placement.shift_us == {"a": 5_000 - 10}
    assert placement.uncertainty_us == {"a": 41}
    assert placement.notes == (
        "b: not placed on the timeline: no clock offset of host b",
        "c: not placed on the timeline: no clock sample before the capture",
        "d: not placed on the timeline: no clock sample after it",
    )


def test_apply_places_the_packets_of_placed_points_only() -> None:
    def packet(point: str) -> Packet:
        return Packet(1, point, 1_000, ("198.18.0.1", 4000), ("198.18.0.2", 7174), frozenset())

    conn = Connection(("198.18.0.1", 4000), ("198.18.0.2", 7174), (packet("a"), packet("b")))
    exchange = Exchange((conn,), points=("a", "b"), notes=("cut",))
    placed = Placement({"a": 250}, {"a": 30}, ("b: not placed",)).apply(exchange)
    assert [p.t_us for p in placed.connections[0].packets] == [1_250, None]
    assert placed.uncertainty_us == {"a": 30}
    assert placed.notes == ("cut", "b: not placed")
