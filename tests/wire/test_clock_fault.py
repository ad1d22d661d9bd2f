"""A host's wall clock stepped during a capture (issue 14's fault campaign): the placement
says so, with the uncertainty it makes (the real step: tests/faults/test_fault_lab.py)."""

from __future__ import annotations

from hil.judge.timeline import ClockOffset
from hil.judge.timeline import WallSample as Sample
from hil.wire.clock import place

OFFSET = ClockOffset("a", offset_us=5_000, uncertainty_us=40)


def test_a_wall_clock_stepped_during_the_capture_is_noted_with_the_uncertainty() -> None:
    # The host's clock was set 300 s ahead (date -s) between the samples.
    before = Sample("a", wall_us=2_000_000, mono_us=1_000_000, spread_us=3)
    after = Sample("a", wall_us=302_500_000, mono_us=1_500_000, spread_us=3)
    placement = place({"a": (before, after)}, [OFFSET])
    assert placement.uncertainty_us == {"a": 40 + 3 + 300_000_000}
    assert placement.notes == (
        "a: a's wall clock was stepped by +300.0 s during the capture; its packets are "
        "placed to within 300.0 s",
    )
    # Slewing (10 µs here, as in the first test) is no step.
    assert place({"a": (before, Sample("a", 2_500_010, 1_500_000, 7))}, [OFFSET]).notes == ()
