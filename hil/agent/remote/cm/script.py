"""A scenario script run inside a CM worker: steps at ctypes speed, stamped on the host clock.

The controller sends one script (``protocol.ScenarioParams``: checked here
with :func:`protocol.scenario_problems`, the same check the controller runs
before sending) and gets one answer: every step's result and the worker's log
since the caller's cursor.  Each step waits for its trigger (a host
CLOCK_MONOTONIC time, an event, or the previous step's end, plus a delay),
then runs one worker operation; no controller round trip lies between two
steps, so a destroy can follow a connect by tens of microseconds and a
reaction to an event comes as soon as the worker's poller has stamped it.

How late each step ran (``late_us``) is measured, not assumed: the
controller reads the achieved timing back from these stamps.
"""

from __future__ import annotations

import errno
import sys
import time
from typing import TYPE_CHECKING, Any

from ...protocol import (
    CMEventEntry,
    CMLogEntry,
    ScenarioParams,
    ScenarioReply,
    ScenarioStep,
    ScenarioStepResult,
    scenario_problems,
)
from ..hostclock import now_us
from ..librdmacm import RdmaError

if TYPE_CHECKING:
    from .state import WorkerState

SPIN_US = 2000  # the last stretch before a step's time is spun (with GIL yields), not slept
SWITCH_INTERVAL_S = 0.0002  # the poller and the script hand the GIL over this often
DEFAULT_WAIT_S = 10.0  # an 'on' trigger's bound when the step gives none
DEFAULT_DEADLINE_S = 60.0
# What a step's result keeps of its op's reply: a connect's or accept's QP, a write's
# completion, an id_first destroy's QP destroy time.
REPLY_KEPT = ("qp", "wc_status", "wc_status_name", "vendor_err", "qp_us")


class ScenarioError(ValueError):
    """A script that does not pass :func:`protocol.scenario_problems`."""


def sleep_until(target_us: int) -> None:
    """Return at ``target_us`` (host clock) or just after: sleep, then spin the last
    stretch, yielding the GIL so the poller keeps stamping events meanwhile."""
    left = target_us - now_us()
    if left > SPIN_US:
        time.sleep((left - SPIN_US) / 1e6)
    while now_us() < target_us:
        time.sleep(0)


class Script:
    """One run of a script on a worker: the bound names, the consumed events, the results."""

    def __init__(self, worker: WorkerState, params: ScenarioParams) -> None:
        problems = scenario_problems(params)
        if problems:
            raise ScenarioError("; ".join(problems))
        self.w = worker
        self.steps: list[ScenarioStep] = params["steps"]
        self.after = params.get("after", 0)
        self.linger_s = params.get("linger_s", 0.0)
        self.deadline_us = now_us() + int(params.get("deadline_s", DEFAULT_DEADLINE_S) * 1e6)
        self.names: dict[str, int] = {}
        self.consumed: set[int] = set()  # log seqs of events that triggered a step
        self.start_us = params.get("start_us", 0) or now_us()
        # Triggers look at the events the caller has not fetched: those after its cursor.
        self.mark = self.after

    def run(self) -> ScenarioReply:
        """Every step in order; a trigger that never comes skips the rest."""
        old = sys.getswitchinterval()
        sys.setswitchinterval(SWITCH_INTERVAL_S)
        try:
            if self.start_us <= self.deadline_us:
                sleep_until(self.start_us)
            results: list[ScenarioStepResult] = []
            prev_end = self.start_us  # the first step's target: how late it ran shows the start's
            for i, step in enumerate(self.steps):
                if results and results[-1]["result"] in ("timeout", "skipped"):
                    results.append({"index": i, "op": step["op"], "result": "skipped"})
                    continue
                res = self._step(i, step, prev_end)
                prev_end = res.get("t_us", prev_end) + res.get("us", 0)
                results.append(res)
            if self.linger_s > 0:
                time.sleep(min(self.linger_s, max(0, self.deadline_us - now_us()) / 1e6))
        finally:
            sys.setswitchinterval(old)
        log: list[CMLogEntry] = list(self.w.log.entries[self.after :])
        return {"t_us": self.start_us, "end_us": now_us(), "steps": results, "log": log}

    def _step(self, i: int, step: ScenarioStep, prev_end: int) -> ScenarioStepResult:
        res: ScenarioStepResult = {"index": i, "op": step["op"], "result": "ok"}
        if "name" in step:
            res["name"] = step["name"]
        event: CMEventEntry | None = None
        if "at_us" in step:
            target = step["at_us"]
        elif "on" in step:
            event = self._trigger(step)
            if event is None:
                res["result"] = "timeout"
                return res
            res["event_seq"] = event["seq"]
            target = event["host_t_us"]
        else:
            target = prev_end
        target += step.get("after_us", 0)
        res["target_us"] = target
        if target > self.deadline_us:
            res["result"] = "timeout"  # its time lies past the script's deadline
            return res
        handle = self._handle(step, event)
        if handle is None and ("id_of" in step or "id" in step):
            res["result"] = "no_id"
            return res
        kwargs: dict[str, Any] = dict(step.get("params", {}))
        if handle is not None:
            kwargs["id"] = res["id"] = handle
        sleep_until(target)
        t0 = now_us()
        try:
            # A worker operation by name (protocol.CM_OPS), as server.py runs a request's.
            reply = getattr(self.w, step["op"])(**kwargs)
        except RdmaError as e:
            res["result"] = errno.errorcode.get(e.errno or 0, str(e.errno))
            made = getattr(e, "handle", None)
            if handle is None and isinstance(made, int):
                res["id"] = made
            res["t_us"] = getattr(e, "t_us", t0)
            res["us"] = getattr(e, "us", now_us() - t0)
        else:
            res["t_us"], res["us"] = reply["t_us"], reply["us"]
            if isinstance(reply.get("id"), int):
                res["id"] = reply["id"]
            kept = {k: reply[k] for k in REPLY_KEPT if k in reply}
            if kept:
                res["reply"] = kept
        res["late_us"] = res["t_us"] - target
        if "name" in step and "id" in res:
            self.names[step["name"]] = res["id"]
        return res

    def _handle(self, step: ScenarioStep, event: CMEventEntry | None) -> int | None:
        if "id" in step:
            return step["id"]
        ref = step.get("id_of")
        if ref == "event":
            return event["id"] if event is not None else None
        return self.names.get(ref) if ref is not None else None

    def _trigger(self, step: ScenarioStep) -> CMEventEntry | None:
        """The first unconsumed event the step waits for, or None at its bound."""
        ref = step.get("on_id_of")
        handle = self.names.get(ref) if ref else None
        if ref and handle is None:
            return None  # the step that should have made the id did not
        wait_s = step.get("wait_s", DEFAULT_WAIT_S)
        deadline = min(now_us() + int(wait_s * 1e6), self.deadline_us)
        log = self.w.log
        while True:
            with log.cond:
                for entry in log.entries[self.mark :]:
                    if (
                        entry["kind"] == "event"
                        and entry["type"] == step["on"]
                        and (handle is None or entry["id"] == handle)
                        and entry["seq"] not in self.consumed
                    ):
                        self.consumed.add(entry["seq"])
                        return entry
                left = deadline - now_us()
                if left <= 0:
                    return None
                log.cond.wait(left / 1e6)


def run(worker: WorkerState, params: ScenarioParams) -> ScenarioReply:
    """Check and run one script on ``worker``; :class:`ScenarioError` when it is malformed."""
    return Script(worker, params).run()
