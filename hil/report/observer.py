"""The Allure report as an observer of pair runs (:mod:`hil.cm.observer`).

Each sequence run becomes an Allure step with its parameters, each
controller action a sub-step with its parameters and result; a complete
run's timeline (picture and JSON), contract verdict, kernel log and resource
counts are attached, and so is the partial timeline of a run that failed
half-way.  The provider the run really found is kept for the test's labels.
"""

from __future__ import annotations

from contextlib import ExitStack

from hil.cm.observer import Observer, RunInfo, StepInfo
from hil.judge.contract import Verdict
from hil.judge.timeline import Action, Timeline
from hil.report.attach import (
    attach_kernel_log,
    attach_resource_counts,
    attach_timeline,
    attach_verdict,
    step,
)


class AllureObserver(Observer):
    """Steps and attachments for every CM run of the session's pair run."""

    name = "allure"

    def __init__(self) -> None:
        self.run: RunInfo | None = None
        self._open: list[ExitStack] = []

    def run_started(self, info: RunInfo) -> None:
        self.run = info

    def step_started(self, step_info: StepInfo) -> None:
        stack = ExitStack()
        stack.enter_context(
            step(f"sequence {step_info.name}", direction=step_info.direction, **step_info.params)
        )
        self._open.append(stack)

    def step_finished(self, step_info: StepInfo, error: BaseException | None) -> None:
        if self._open:
            stack = self._open.pop()
            stack.__exit__(
                type(error) if error else None, error, error.__traceback__ if error else None
            )

    def action(self, action: Action) -> None:
        target = f" {action.id}" if action.id else ""
        took = {} if action.duration_us is None else {"took_ms": action.duration_us / 1000}
        host = self.run.hosts[0 if action.side == "a" else 1] if self.run else action.side
        with step(
            f"{host}: {action.name}{target} -> {action.result}",
            **{**action.params, "at_ms": action.t_us / 1000, **took},
        ):
            pass

    def timeline(self, timeline: Timeline, complete: bool) -> None:
        if not complete:  # what happened before the run failed
            attach_timeline(timeline)

    def verdict(self, timeline: Timeline, verdict: Verdict) -> None:
        attach_timeline(timeline, verdict)
        attach_verdict(verdict)
        if timeline.kernel_log:
            attach_kernel_log(timeline.kernel_log)
        if timeline.resources:
            attach_resource_counts(timeline.resources)
