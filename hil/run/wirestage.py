"""A test's wire stage: the link captured around it, then decoded, placed and judged.

The link's capture plan (:mod:`hil.wire.plan`) says where to capture: tcpdump
on both ends for a host-TCP provider (siw), a capture host or a vendor tool
where the inventory says.  A link with no usable capture point (``capture:
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
from pathlib import Path
from typing import TYPE_CHECKING

from hil.errors import HilError

if TYPE_CHECKING:
    from hil.host.hosts import Hosts
    from hil.inventory.model import Pair
    from hil.judge.profiles import Profiles
    from hil.judge.timeline import Timeline
    from hil.wire.judge import WireReport
    from hil.wire.linkcapture import LinkCapture
    from hil.wire.plan import CapturePlan

log = logging.getLogger(__name__)


@dataclass
class WireStage:
    """The capture of one test; :meth:`start` it, :meth:`finish` it, :meth:`close` it."""

    plan: CapturePlan
    capture: LinkCapture | None
    error: str | None  # why a usable plan is not capturing (a lab error)
    scratch: Path | None = None  # the fetched files, kept until close()

    @classmethod
    def start(cls, hosts: Hosts, pair: Pair, driver: str, count: int) -> WireStage:
        """Start the link's capture plan; a failed start is kept as the stage's error."""
        from hil.wire.linkcapture import LinkCapture
        from hil.wire.plan import capture_plan

        plan = capture_plan(pair, driver)
        if not plan.usable:
            return cls(plan, None, None)
        try:
            capture = LinkCapture.start(hosts, plan, count=count)
        except HilError as e:
            return cls(plan, None, f"the capture did not start: {e}")
        missing = [p.name for p in plan.points if p.name not in capture.running]
        if missing:
            capture.discard()
            why = "; ".join(capture.notes) or f"{', '.join(missing)} not capturing"
            return cls(plan, None, f"the capture did not start: {why}")
        return cls(plan, capture, None)

    def discard(self) -> None:
        """Stop what runs, judging nothing (a host of the pair crashed)."""
        if self.capture is not None:
            self.capture.discard()
            self.capture = None

    def finish(self, timelines: tuple[Timeline, ...], profile: Profiles) -> WireReport:
        """Stop, fetch, decode, place and judge; HilError when a planned point delivered
        nothing (the test is then not judged on the wire) or tshark failed."""
        from hil.wire.decode import decode
        from hil.wire.judge import WireReport, judge

        if self.error is not None:
            raise HilError(f"not judged on the wire: {self.error}")
        if self.capture is None:  # no usable point: every rule skipped, saying why
            verdict = judge(None, timelines, profile, unusable=self.plan.reason)
            return WireReport({}, None, verdict, timelines)
        self.scratch = Path(tempfile.mkdtemp(prefix="hil-wire-"))
        known = [o for tl in timelines for o in tl.offsets]  # one time base with the events
        captured = self.capture.stop(self.scratch, known)
        self.capture = None
        lost = [p.name for p in self.plan.points if p.name not in captured.files]
        if lost:
            notes = "; ".join(captured.notes) or "no file"
            raise HilError(f"not judged on the wire: {', '.join(lost)} delivered no file: {notes}")
        placed = captured.placement().apply(decode(captured.files))
        exchange = replace(placed, notes=(*captured.notes, *placed.notes))
        return WireReport(captured.files, exchange, judge(exchange, timelines, profile), timelines)

    def close(self) -> None:
        """Remove the fetched files (observers copied what they keep) and stop what runs."""
        self.discard()
        if self.scratch is not None:
            shutil.rmtree(self.scratch, ignore_errors=True)
            self.scratch = None
