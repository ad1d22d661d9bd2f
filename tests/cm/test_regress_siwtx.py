"""hil/cm/regressions/siwtx.py: the kernel consumer's knob read, and when c18646248fed's
window counts as hit.

The lab run is suites/test_regressions.py -k c18646248fed; its revert kernel's,
bench/reverts/run.py --revert c18646248fed (docs/regressions.md).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from hil.cm.regressions import siwtx, widen
from hil.cm.regressions.evidence import missing, unobservable
from hil.judge.timeline import Timeline
from hil.ssh.session import Result


def test_the_knob_reads_as_the_instrument_prints_it() -> None:
    # bench/reverts/widen/c18646248fed.patch, hil_ulp_get: "%s rv=%d slab=%d crossings=%d\n"
    assert siwtx.parse("done rv=0 slab=1 crossings=3\n") == siwtx.Consumer("done", 0, True, 3)
    assert siwtx.parse("done rv=-110 slab=1 crossings=0") == siwtx.Consumer("done", -110, True, 0)
    assert siwtx.parse("N\n") is None  # another kernel's parameter of that name


class _Knob:
    """An agent whose ``cat`` of the knob answers each of ``states`` in turn (the last
    one for ever); None: the file is not there."""

    def __init__(self, *states: str | None) -> None:
        self.states = list(states)
        self.reads = 0

    def run(self, argv: list[str], timeout: float, **_: Any) -> Result:
        assert argv == ["cat", siwtx.KNOB] and timeout == widen.CALL_S
        state = self.states[min(self.reads, len(self.states) - 1)]
        self.reads += 1
        if state is None:
            return Result(tuple(argv), 1, "", f"cat: {siwtx.KNOB}: No such file or directory")
        return Result(tuple(argv), 0, state, "")


def test_the_wait_ends_at_done_and_gives_up_at_its_bound() -> None:
    knob = _Knob("running rv=0 slab=1 crossings=0", "done rv=0 slab=1 crossings=2")
    assert siwtx.wait_done(knob, timeout=5) == siwtx.Consumer("done", 0, True, 2)  # type: ignore[arg-type]
    stuck = _Knob("running rv=0 slab=1 crossings=0")
    assert siwtx.wait_done(stuck, timeout=0.3).state == "running"  # type: ignore[arg-type,union-attr]
    assert siwtx.wait_done(_Knob(None), timeout=5) is None  # type: ignore[arg-type]


def _timeline(window: float) -> Timeline:
    tl = Timeline("regress-siw-sendpages-slab", "siw", ("a", "b"))
    return replace(tl, metrics={"reached_listening": 1.0, f"window_{siwtx.WINDOW}": window})


def test_a_run_whose_pages_never_crossed_fails_window_not_reached() -> None:
    assert missing(_timeline(0.0)) == (
        "window not reached (regress-siw-sendpages-slab): copied slab page sent past its end"
    )


def test_a_kernel_without_the_consumer_says_not_observable_and_a_hit_passes() -> None:
    assert missing(_timeline(-1.0)) is None and unobservable(_timeline(-1.0)) is not None
    assert missing(_timeline(1.0)) is None and unobservable(_timeline(1.0)) is None
