"""hil/cm/regressions/goingdown.py: when 60dc7fcafea8's window counts as hit.

The lab run is suites/test_regressions.py -k 60dc7fcafea8; its revert kernel's,
bench/reverts/run.py --revert 60dc7fcafea8 (docs/regressions.md).
"""

from __future__ import annotations

from dataclasses import replace

from hil.cm.endpointcore import Outcome
from hil.cm.regressions.evidence import missing
from hil.cm.regressions.goingdown import FIRST_DESTROY_S, held, soon_after
from hil.judge.records import Action
from hil.judge.timeline import Timeline

PULL_US = 1_000_000
HOLD_MS = 4000


def destroy(t_us: int, took_us: int = 200_000) -> Outcome:
    return Outcome(Action(t_us, "a", "destroy", f"a:{t_us}", {}, "ok", took_us))


def test_widened_every_destroy_inside_the_hold_after_the_marker_is_the_window() -> None:
    marked = PULL_US + 300_000
    gone = [destroy(marked + 10_000), destroy(marked + 400_000)]
    assert held(gone, marked, PULL_US, HOLD_MS)


def test_widened_a_destroy_before_the_marker_or_past_the_hold_is_not() -> None:
    marked = PULL_US + 300_000
    assert not held([destroy(marked - 1), destroy(marked + 10)], marked, PULL_US, HOLD_MS)
    late = PULL_US + HOLD_MS * 1000 - 100_000  # ends 100 ms after the walk went on
    assert not held([destroy(marked + 10), destroy(late)], marked, PULL_US, HOLD_MS)
    assert not held([], marked, PULL_US, HOLD_MS)


def test_unwidened_the_first_destroy_must_come_soon_after_the_pull() -> None:
    soon = PULL_US + int(FIRST_DESTROY_S * 1e6) - 1
    assert soon_after([destroy(soon), destroy(soon + 500_000)], PULL_US)
    assert not soon_after([destroy(soon + 2)], PULL_US)
    assert not soon_after([], PULL_US)


def test_a_run_whose_destroys_missed_the_window_fails_window_not_reached() -> None:
    tl = Timeline("regress-siw-going-down", "siw", ("a", "b"))
    name = "window_a_qp_destroyed_while_the_going_down_walk_held_the_next"
    tl = replace(tl, metrics={"reached_connections_established": 1.0, name: 0.0})
    gap = missing(tl)
    assert gap is not None and gap.startswith("window not reached")
    assert "going down walk held the next" in gap
