"""Scenarios: a script a CM endpoint runs by itself (``cm_call`` op ``scenario``;
cm/script.py on the agent), its reply, and :func:`scenario_problems`.

Declared without ``X | None`` so that the agent (python >= 3.9) can check a
script against these with :func:`scenario_problems` before it runs one step."""

from __future__ import annotations

import typing
from collections.abc import Mapping
from typing import Any, TypedDict

from .checks import ProtocolMismatch, check
from .cmevents import CMLogEntry
from .names import CMEventType, ScenarioOpName
from .spec import CM_OPS, CMOp

__all__ = [
    "ScenarioStep", "ScenarioParams", "ScenarioStepResult", "ScenarioReply", "OP_SCENARIO",
    "scenario_problems",
]  # fmt: skip


class _ScenarioStepRequired(TypedDict):
    op: ScenarioOpName


class ScenarioStep(_ScenarioStepRequired, total=False):
    """One step: an operation, the id it acts on, and when it runs (its trigger).

    Trigger: ``at_us`` (a time on the host's CLOCK_MONOTONIC), else ``on`` (the
    first event of that type, for the id bound to ``on_id_of`` if given, that
    the caller had not fetched (after ``after``) and that triggered no step
    before), else the
    end of the previous step (for the first: the script's ``start_us``, else
    its arrival); then
    ``after_us`` more.  ``wait_s`` bounds the wait for an ``on`` event.
    The id: ``id`` (a handle made before the script), or ``id_of``: the id
    bound to an earlier step's ``name``, or ``"event"``, the triggering
    event's id.  ``name`` binds the id the step made (listen, connect) or
    acted on.  ``params``: the op's other params (``CM_OPS[op].params``).
    """

    name: str
    id: int
    id_of: str
    params: dict[str, Any]
    at_us: int
    on: CMEventType
    on_id_of: str
    after_us: int
    wait_s: float


class _ScenarioRequired(TypedDict):
    steps: list[ScenarioStep]


class ScenarioParams(_ScenarioRequired, total=False):
    after: int  # the log seq the caller already has: the reply's log starts after it
    start_us: int  # host CLOCK_MONOTONIC: the first step's time (not before); 0: on arrival
    linger_s: float  # after the last step, keep collecting events this long
    deadline_s: float  # the whole script's bound (triggers included); the rest is skipped


class _ScenarioStepResultRequired(TypedDict):
    index: int
    op: ScenarioOpName
    result: str  # "ok", an errno's name, "timeout" (trigger never came), "skipped", "no_id"


class ScenarioStepResult(_ScenarioStepResultRequired, total=False):
    """What one step did, on the host's clock (all µs)."""

    name: str
    id: int  # the id it made or acted on
    target_us: int  # when the trigger said to run it
    t_us: int  # when the op began
    us: int  # how long the op took
    late_us: int  # t_us - target_us: how late the worker was
    event_seq: int  # the log seq of the event that triggered it
    reply: dict[str, Any]  # of the reply: qp (connect, accept), wc_status (write), qp_us


class ScenarioReply(TypedDict):
    """The whole run in one answer: each step, and the log since ``after``."""

    t_us: int  # when the script began: start_us if given, else when it arrived (host clock)
    end_us: int  # when it ended, linger included
    steps: list[ScenarioStepResult]
    log: list[CMLogEntry]


def scenario_problems(params: Mapping[str, object]) -> list[str]:
    """What is wrong with a script (``ScenarioParams``), [] when nothing: its shape,
    then each step's trigger, id reference and params.  Both ends run this."""
    try:
        check(ScenarioParams, dict(params), "scenario", strict=True)
    except ProtocolMismatch as e:
        return [str(e)]
    steps = typing.cast("list[ScenarioStep]", params["steps"])
    problems: list[str] = []
    names: set[str] = set()
    for i, step in enumerate(steps):
        where = f"scenario step {i} ({step['op']})"
        if "at_us" in step and "on" in step:
            problems.append(f"{where}: at_us and on are two triggers; give one")
        if "wait_s" in step and "on" not in step:
            problems.append(f"{where}: wait_s bounds an 'on' trigger, and it has none")
        if step.get("on_id_of", "") not in names | {""}:
            problems.append(f"{where}: on_id_of {step['on_id_of']!r} names no earlier step")
        ref = step.get("id_of")
        if "id" in step and ref is not None:
            problems.append(f"{where}: id and id_of both given; give one")
        if ref == "event" and "on" not in step:
            problems.append(f"{where}: id_of 'event' needs an 'on' trigger")
        elif ref is not None and ref != "event" and ref not in names:
            problems.append(f"{where}: id_of {ref!r} names no earlier step")
        spec = CM_OPS[step["op"]]
        takes_id = "id" in spec.params.__annotations__
        op_params = dict(step.get("params", {}))
        if takes_id:
            if "id" in op_params or ("id" not in step and ref is None):
                problems.append(f"{where}: the id goes in id or id_of, not params")
            op_params["id"] = 0
        elif "id" in step or ref is not None:
            problems.append(f"{where}: {step['op']} acts on no id")
        try:
            check(spec.params, op_params, f"{where} params", strict=True)
        except ProtocolMismatch as e:
            problems.append(str(e))
        except TypeError:
            pass  # python 3.9 cannot evaluate ``X | None``: the op refuses what it does not take
        if "name" in step:
            names.add(step["name"])
    return problems


OP_SCENARIO = CMOp("scenario", ScenarioParams, ScenarioReply)
