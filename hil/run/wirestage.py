"""The wire stage: the link captured for a pair run, each test's window decoded and judged.

The link's capture plan (:mod:`hil.wire.plan`) says where to capture: tcpdump
on both ends for a host-TCP provider (siw), a capture host or a vendor tool
where the inventory says.  One capture runs for the whole pair run
(:class:`LinkWire`, the pair run's), and each test gets the window of
packets from its start to its end (:class:`WireStage`): a tcpdump is started
once, not per test, and each test's start and stop cost a clock sample and a
read of the file's new part instead of a process started and stopped on each
host.  A window begins where the last one ended, so packets between two tests
(a fixture's teardown) are the next test's; the wire rules judge only the
connections its timelines name.  A point that stopped (its host crashed, its
file grew past its bound, a vendor tool, which cannot be cut while it runs) is
started again when the next window begins.  A link with no usable capture point (``capture:
none``, an offloading RNIC with no capture host) still gets a verdict: every
rule skipped, with the plan's reason.  A planned point that did not start, or
that delivered no file, is a lab error: the test was not judged on the wire,
and saying "skipped" there would let a test pass unjudged.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from hil.errors import HilError
from hil.wire.capture import COUNT

if TYPE_CHECKING:
    from hil.host.hosts import Hosts
    from hil.inventory.model import Pair
    from hil.judge.profiles import Profiles
    from hil.judge.timeline import Timeline
    from hil.wire.judge import WireReport
    from hil.wire.linkcapture import Captured, LinkCapture
    from hil.wire.plan import CapturePlan

log = logging.getLogger(__name__)


# Each tcpdump's own bound, as a guard: a test's window keeps its first
# ``count`` packets, and a file past ROLL_BYTES is started anew between tests.
ROLL_PACKETS = 10 * COUNT


class LinkWire:
    """The link's capture over a pair run; :meth:`begin` a window per test, :meth:`discard`
    it at the run's end (or when a host of the pair crashed)."""

    def __init__(self, hosts: Hosts, pair: Pair, driver: str) -> None:
        self.hosts = hosts
        self.pair = pair
        self.driver = driver
        self._capture: LinkCapture | None = None

    @cached_property
    def plan(self) -> CapturePlan:
        """Where the link is captured (:func:`hil.wire.plan.capture_plan`)."""
        from hil.wire.plan import capture_plan

        return capture_plan(self.pair, self.driver)

    def begin(self, count: int) -> WireStage:
        """The next test's window (its first ``count`` packets per point); the capture
        started where it does not run.  A point that would not start is the stage's error."""
        from hil.wire.linkcapture import LinkCapture

        if not self.plan.usable:
            return WireStage(self, self.plan, None, count)
        try:
            if self._capture is None:
                self._capture = LinkCapture.start(self.hosts, self.plan, count=ROLL_PACKETS)
            else:
                self._capture.begin(ROLL_PACKETS)
        except HilError as e:
            self.discard()
            return WireStage(self, self.plan, f"the capture did not start: {e}", count)
        if missing := self._capture.missing:
            why = "; ".join(self._capture.notes) or f"{', '.join(missing)} not capturing"
            self.discard()
            return WireStage(self, self.plan, f"the capture did not start: {why}", count)
        return WireStage(self, self.plan, None, count)

    def cut(self, directory: Path, timelines: tuple[Timeline, ...], count: int) -> Captured:
        """The window since :meth:`begin`, a pcap per point in ``directory``."""
        if self._capture is None:
            raise HilError("not judged on the wire: the capture stopped during the test")
        known = [o for tl in timelines for o in tl.offsets]  # one time base with the events
        return self._capture.cut(directory, known, count)

    def discard(self) -> None:
        """Stop and remove what runs, fetching nothing; never raises."""
        capture, self._capture = self._capture, None
        if capture is not None:
            capture.discard()


@dataclass
class WireStage:
    """One test's window of the link's capture: :meth:`finish` it, then :meth:`close` it."""

    link: LinkWire
    plan: CapturePlan
    error: str | None  # why a usable plan is not capturing (a lab error)
    count: int  # the first N packets per point
    scratch: Path | None = None  # the fetched files, kept until close()

    def discard(self) -> None:
        """A host of the pair crashed: the link's capture is dropped, judging nothing."""
        self.link.discard()

    def finish(self, timelines: tuple[Timeline, ...], profile: Profiles) -> WireReport:
        """Cut, decode, place and judge; HilError when a planned point delivered nothing
        (the test is then not judged on the wire) or tshark failed."""
        from hil.wire.decode import decode
        from hil.wire.judge import WireReport, judge

        if self.error is not None:
            raise HilError(f"not judged on the wire: {self.error}")
        if not self.plan.usable:  # no usable point: every rule skipped, saying why
            verdict = judge(None, timelines, profile, unusable=self.plan.reason)
            return WireReport({}, None, verdict, timelines)
        self.scratch = Path(tempfile.mkdtemp(prefix="hil-wire-"))
        captured = self.link.cut(self.scratch, timelines, self.count)
        lost = [p.name for p in self.plan.points if p.name not in captured.files]
        if lost:
            notes = "; ".join(captured.notes) or "no file"
            raise HilError(f"not judged on the wire: {', '.join(lost)} delivered no file: {notes}")
        placed = captured.placement().apply(decode(captured.files))
        exchange = replace(placed, notes=(*captured.notes, *placed.notes))
        return WireReport(captured.files, exchange, judge(exchange, timelines, profile), timelines)

    def close(self) -> None:
        """Remove the fetched files (observers copied what they keep); the capture goes on."""
        if self.scratch is not None:
            shutil.rmtree(self.scratch, ignore_errors=True)
            self.scratch = None
