"""hil/cm/regressions/portquery.py: when 16b87037b488's window counts as hit.

The lab run is suites/test_regressions.py -k 16b87037b488; its revert kernel's,
bench/reverts/run.py --revert 16b87037b488 (docs/regressions.md).
"""

from __future__ import annotations

from dataclasses import replace

from hil.cm.regressions.evidence import missing, unobservable
from hil.cm.regressions.portquery import WINDOW, core_let_go
from hil.judge.timeline import Timeline

# The widening's two lines (bench/reverts/widen/16b87037b488.patch), as a guest logs them.
OPENED = (
    "hil widen 16b87037b488: window open: hilrgsiw0's port query let go of its netdev, "
    "the driver's query_port follows in 3000 ms"
)
LET_GO = "hil widen 16b87037b488: window closed: the core let go of hilrgsiw0's netdev"
HOLDS = "hil widen 16b87037b488: window closed: the core still holds hilrgsiw0's netdev"


def _timeline(window: float) -> Timeline:
    tl = Timeline("regress-siw-netdev-port-query", "siw", ("a", "b"))
    metrics = {"reached_device_made": 1.0, "reached_device_gone": 1.0, f"window_{WINDOW}": window}
    return replace(tl, metrics=metrics)


def test_the_window_is_a_hold_that_ended_after_the_core_let_go() -> None:
    assert core_let_go([OPENED, LET_GO])


def test_a_hold_that_ended_with_the_netdev_still_held_or_no_closing_line_is_not() -> None:
    assert not core_let_go([OPENED, HOLDS])
    assert not core_let_go([OPENED])
    assert not core_let_go([])


def test_a_run_that_missed_the_window_fails_window_not_reached() -> None:
    gap = missing(_timeline(0.0))
    assert gap == (
        "window not reached (regress-siw-netdev-port-query): "
        "the drivers query came after the core let go"
    )


def test_an_unwidened_kernel_says_not_observable_and_a_hit_passes() -> None:
    assert missing(_timeline(-1.0)) is None and unobservable(_timeline(-1.0)) is not None
    assert missing(_timeline(1.0)) is None and unobservable(_timeline(1.0)) is None
