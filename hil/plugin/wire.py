"""The wire judge in pytest: each test on the pair is captured, decoded and judged.

For every test that sets the pair up (``--hil-wire judge``, the default):

1. before the test, the link's capture plan (:mod:`hil.wire.plan`: tcpdump
   on both ends for siw, a capture host or a vendor tool where the
   inventory says) is started and confirmed capturing;
2. the test runs; an observer of the session's pair run keeps each
   sequence run's timeline;
3. after the after-test checks waited for the stack to settle (so the
   last FIN or RST is in), the capture is stopped, fetched, decoded with
   tshark (:mod:`hil.wire.decode`), placed on the timelines' time base and
   judged by the wire rules (:mod:`hil.wire.judge`);
4. ``pytest_hil_wire`` hands the captures, packets and verdict to the
   report; a broken wire rule then fails the test, naming the rule, the
   connection and the packets.

A link with no usable capture point (``capture: none``, an offloading RNIC
with no capture host) still gets a verdict: every rule skipped, with the
reason.  ``--hil-wire off`` captures nothing.
"""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from hil.cm.observer import Observer
from hil.errors import HilError
from hil.plugin import option_group
from hil.report.crash import crashed
from hil.wire.capture import COUNT

if TYPE_CHECKING:
    from hil.judge.profiles import Profiles
    from hil.judge.timeline import Timeline
    from hil.run import PairRun
    from hil.wire.judge import WireReport
    from hil.wire.linkcapture import LinkCapture

log = logging.getLogger(__name__)

WIRE_CHOICES = ("judge", "off")


class TimelineKeeper(Observer):
    """Keeps the timelines (complete or partial) of the sequences a test ran."""

    def __init__(self) -> None:
        self._timelines: list[Timeline] = []

    def timeline(self, timeline: Timeline, complete: bool) -> None:
        self._timelines.append(timeline)

    def take(self) -> tuple[Timeline, ...]:
        """The timelines kept since the last call (and forget them)."""
        kept, self._timelines = tuple(self._timelines), []
        return kept


KEEPER_KEY = pytest.StashKey[TimelineKeeper]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = option_group(parser)
    group.addoption(
        "--hil-wire",
        choices=WIRE_CHOICES,
        default="judge",
        help="Capture both ends of the pair's link during each test on the pair and judge "
        "the packets by the wire rules (judge, the default), or capture nothing (off).",
    )
    group.addoption(
        "--hil-wire-packets",
        type=int,
        default=COUNT,
        metavar="N",
        help=f"Keep at most the first N packets per capture point and test (default {COUNT}).",
    )


def pytest_hil_observers(config: pytest.Config) -> list[Observer]:
    """The observer that keeps each test's timelines for its wire verdict."""
    keeper = config.stash[KEEPER_KEY] = TimelineKeeper()
    return [keeper]


@pytest.fixture
def hil_wire(request: pytest.FixtureRequest) -> Iterator[None]:
    """Capture the link for this test and judge the packets after it (see the module doc).

    Requested by the after-test checks, so that the capture starts before
    their baseline and stops after they let the stack settle.
    """
    config = request.config
    if config.getoption("hil_wire") == "off" or "hil_setup" not in request.fixturenames:
        yield
        return
    run: PairRun = request.getfixturevalue("hil_run")
    request.getfixturevalue("hil_setup")
    profile: Profiles = request.getfixturevalue("profile")
    keeper = config.stash[KEEPER_KEY]
    keeper.take()  # what earlier tests (or the setup) ran is not this test's
    capture, unusable = _start(run, config.getoption("hil_wire_packets"))
    try:
        yield
    finally:
        if crashed(request.node) is not None:
            # A host of the pair crashed (hil.plugin.crash): nothing to judge; stop what runs.
            if capture is not None:
                capture.discard()
            report = None
        else:
            try:
                report = _finish(request.node, capture, unusable, keeper.take(), profile)
            except HilError as e:  # tshark missing or failing: the judge could not run
                pytest.fail(f"hil wire: {type(e).__name__}: {e}", pytrace=False)
    if report is not None and not report.verdict.ok:
        pytest.fail(report.verdict.to_text(), pytrace=False)


def _start(run: PairRun, count: int) -> tuple[LinkCapture | None, str | None]:
    """The running capture, or None and why there is none."""
    from hil.wire.linkcapture import LinkCapture
    from hil.wire.plan import capture_plan

    plan = capture_plan(run.pair, run.provider.driver)
    if not plan.usable:
        return None, plan.reason
    try:
        return LinkCapture.start(run.hosts, plan, count=count), None
    except HilError as e:
        log.warning("no wire capture: %s", e)
        return None, f"the capture did not start: {e}"


def _finish(
    item: pytest.Item,
    capture: LinkCapture | None,
    unusable: str | None,
    timelines: tuple[Timeline, ...],
    profile: Profiles,
) -> WireReport:
    """Stop, decode, place and judge; tell the report; the files go when it returned."""
    from hil.wire.decode import decode
    from hil.wire.judge import WireReport, judge

    with tempfile.TemporaryDirectory(prefix="hil-wire-") as scratch:
        exchange = None
        files: dict[str, Path] = {}
        if capture is not None:
            # The timelines' own offsets: packets and events on one time base.
            known = [o for tl in timelines for o in tl.offsets]
            captured = capture.stop(Path(scratch), known)
            files = captured.files
            if not files:
                unusable = "no capture point delivered a file: " + "; ".join(captured.notes)
            else:
                placed = captured.placement().apply(decode(files))
                exchange = replace(placed, notes=(*captured.notes, *placed.notes))
        verdict = judge(exchange, timelines, profile, unusable=unusable)
        report = WireReport(files, exchange, verdict, timelines)
        item.config.hook.pytest_hil_wire(item=item, report=report)
    return report
