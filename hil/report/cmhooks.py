"""Report what a CMSession does, without the CM engine knowing about Allure.

The plugin calls :func:`observe` on every fixture value that is a
``CMSession``.  It wraps that one object's public ``run`` and ``recording``
(instance attributes; the class is untouched), so that each sequence run is
an Allure step with its parameters, each controller action of the run a
sub-step with its parameters and result, and the run's timeline (picture and
JSON), contract verdict, kernel log and resource counts are attached.  When a
sequence fails half-way, the partial timeline of its recording is attached.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from hil.cm.contract import check
from hil.report.attach import (
    attach_kernel_log,
    attach_resources,
    attach_timeline,
    attach_verdict,
    step,
)

if TYPE_CHECKING:
    from hil.cm.recording import Recording
    from hil.cm.session import CMSession
    from hil.cm.timeline import Timeline


def observe(session: CMSession) -> CMSession:
    """Wrap ``session``'s ``run`` and ``recording`` for the report; returns it."""
    recordings: list[Recording] = []
    original_recording = session.recording
    original_run = session.run

    @functools.wraps(original_recording)
    def recording(scenario: str) -> Recording:
        rec = original_recording(scenario)
        recordings.append(rec)
        return rec

    @functools.wraps(original_run)
    def run(name: str, **params: Any) -> Timeline:
        with step(f"sequence {name}", direction=session.direction, **params):
            del recordings[:]
            try:
                timeline = original_run(name, **params)
            except Exception:
                for rec in recordings:
                    attach_timeline(rec.timeline())  # what happened before it failed
                raise
            report_timeline(timeline, session)
            return timeline

    # Instance attributes shadow the methods for this object only.
    session.recording = recording  # type: ignore[method-assign]
    session.run = run  # type: ignore[method-assign]
    return session


def action_steps(timeline: Timeline) -> None:
    """Each controller action of a run as an Allure step with its parameters and result."""
    for a in timeline.actions:
        target = f" {a.id}" if a.id else ""
        took = {} if a.duration_us is None else {"took_ms": a.duration_us / 1000}
        host = timeline.pair[0 if a.side == "a" else 1]
        with step(f"{host}: {a.name}{target} -> {a.result}",
                  **{**a.params, "at_ms": a.t_us / 1000, **took}):
            pass


def report_timeline(timeline: Timeline, session: CMSession) -> None:
    """Steps, picture, verdict and evidence of one finished run."""
    action_steps(timeline)
    verdict = check(timeline, session.profile)
    attach_timeline(timeline, verdict)
    attach_verdict(verdict)
    if timeline.kernel_log:
        attach_kernel_log(timeline.kernel_log)
    if timeline.resources:
        before: dict[str, dict[str, int]] = {r.host: {} for r in timeline.resources}
        after: dict[str, dict[str, int]] = {r.host: {} for r in timeline.resources}
        for r in timeline.resources:
            before[r.host][r.kind] = r.before
            after[r.host][r.kind] = r.after
        attach_resources(before, after)
