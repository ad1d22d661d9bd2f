"""Scenarios run on the hosts: a script of steps a CM endpoint's worker runs by itself.

A controller round trip (SSH, agent, worker pipe) takes milliseconds; the
windows kernel races live in are microseconds wide.  So a :class:`Script` is
sent to an endpoint whole (``cm_call`` op ``scenario``, declared in
``hil.agent.protocol``); the worker runs each :class:`Step` at its
trigger -- a time, an event, or the previous step's end, plus a delay --
at the speed of ctypes calls, stamps every step and event on the host's
clock, and answers once with the whole log (``hil/agent/remote/cm/script.py``).

:func:`run` records that answer like any call: each step an action, each
event an event, on the controller's time base.  :func:`together` starts
scripts on several endpoints (both hosts of a pair) at one controller time,
turned into each host's clock by its measured offset; what was achieved is
read back from the steps' host stamps (:func:`apart`), never assumed.

```python
a = Script((Step("disconnect", cm_id=conn.active_id),))
b = Script((Step("disconnect", cm_id=conn.passive_id),))
ra, rb = together([(conn.active, a, 0), (conn.passive, b, 0)])
gap, uncertainty = apart(ra.steps[0], rb.steps[0])   # µs, controller time base
```
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any

from hil.agent import protocol as wire
from hil.agent.client import cm_request
from hil.cm.clock import controller_us
from hil.cm.endpoint import Endpoint
from hil.cm.endpointcore import SEQ_STRIDE
from hil.errors import InputError
from hil.judge.timeline import Action, Event

LEAD_S = 0.5  # together(): how far ahead the common start lies (the scripts' delivery)
REPLY_SLACK_S = 30.0  # past the script's deadline: a step blocked in the kernel (destroy)


@dataclass(frozen=True)
class Step:
    """One step of a script: an operation, its id, its trigger (``protocol.ScenarioStep``).

    ``cm_id`` is a timeline id made before the script (``"a:1.3"``); ``id_of``
    the ``name`` of an earlier step whose id it acts on, or ``"event"`` (the
    id of the event that triggered it).  Trigger: ``at_us`` (CONTROLLER time,
    turned into the host's by its offset), else ``on`` (an event type, for the
    id of step ``on_id_of`` if given, not fetched before the script), else the
    previous step's end; then
    ``after_us`` more.
    """

    op: wire.ScenarioOpName
    cm_id: str | None = None
    id_of: str | None = None
    name: str | None = None
    params: Mapping[str, Any] = field(default_factory=dict)
    at_us: int | None = None
    on: wire.CMEventType | None = None
    on_id_of: str | None = None
    after_us: int = 0
    wait_s: float | None = None

    def to_wire(self, ep: Endpoint) -> wire.ScenarioStep:
        """This step as ``ep``'s worker takes it (ids as its handles, times on its clock)."""
        out = wire.ScenarioStep(op=self.op)
        if self.params:
            out["params"] = dict(self.params)
        if self.cm_id is not None:
            out["id"] = ep.handle(self.cm_id)
        if self.at_us is not None:
            out["at_us"] = self.at_us - ep.offset.offset_us
        if self.after_us:
            out["after_us"] = self.after_us
        for key in ("id_of", "name", "on", "on_id_of", "wait_s"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        return out


@dataclass(frozen=True)
class Script:
    """Steps run in order from ``start_us`` (controller time; None: on arrival);
    ``linger_s`` more collecting after the last; ``deadline_s`` bounds the whole
    script (a trigger not come by then skips the rest)."""

    steps: tuple[Step, ...]
    linger_s: float = 0.0
    deadline_s: float = 30.0
    start_us: int | None = None

    def starting_at(self, start_us: int) -> Script:
        """This script started at controller time ``start_us``."""
        return replace(self, start_us=start_us)

    def to_wire(self, ep: Endpoint) -> wire.ScenarioParams:
        """The script as ``ep``'s worker takes it, after what ``ep`` has fetched already;
        :class:`InputError` listing every problem ``protocol.scenario_problems`` finds."""
        params = wire.ScenarioParams(
            steps=[s.to_wire(ep) for s in self.steps],
            after=ep.cursor,
            linger_s=self.linger_s,
            deadline_s=self.deadline_s,
        )
        if self.start_us is not None:
            params["start_us"] = self.start_us - ep.offset.offset_us
        problems = wire.scenario_problems(params)
        if problems:
            raise InputError(f"scenario for {ep.host}: " + "; ".join(problems))
        return params


@dataclass(frozen=True)
class StepRun:
    """What one step did; times on the controller's base (µs), ``late_us`` on the host's."""

    index: int
    op: str
    result: str  # "ok", an errno's name, "timeout", "skipped", "no_id"
    side: str
    host: str
    name: str | None = None
    id: str | None = None
    t_us: int | None = None  # when the op began
    host_t_us: int | None = None
    us: int | None = None
    target_us: int | None = None  # when its trigger said to run it
    late_us: int | None = None  # t_us - target_us, both on the host's clock (exact)
    event: Event | None = None  # the event that triggered it
    reply: Mapping[str, Any] = field(default_factory=dict)

    @property
    def ran(self) -> bool:
        """True when the op was called (whatever it answered)."""
        return self.t_us is not None

    @property
    def ok(self) -> bool:
        """True when the op was called and succeeded."""
        return self.result == "ok"


@dataclass(frozen=True)
class ScenarioRun:
    """One script's run on one endpoint: its steps and the events that came meanwhile."""

    side: str
    host: str
    uncertainty_us: int  # the host's clock offset uncertainty: how far its times may be off
    start_us: int
    end_us: int
    steps: tuple[StepRun, ...]
    events: tuple[Event, ...]
    # The pair's host-to-host clock uncertainty when the offsets were derived through it.
    relative_us: int | None = None

    def step(self, name: str) -> StepRun:
        """The step named ``name``."""
        for s in self.steps:
            if s.name == name:
                return s
        raise KeyError(f"no step named {name!r} on {self.host}")


def run(ep: Endpoint, script: Script, timeout: float | None = None) -> ScenarioRun:
    """Run ``script`` on ``ep``'s worker; every step recorded as an action and every event
    delivered meanwhile as an event, like the endpoint's own calls."""
    params = script.to_wire(ep)
    bound = timeout if timeout is not None else script.deadline_s + REPLY_SLACK_S
    reply = cm_request(ep.agent, ep.number, wire.OP_SCENARIO, params, bound)
    fresh = ep.ingest(reply["log"])
    by_seq = {e.seq: e for e in ep.rec.events() if e.side == ep.side}
    steps = tuple(_step(ep, raw, by_seq) for raw in reply["steps"])
    for s in steps:
        if s.ran:
            ep.rec.add_action(_action(ep, s, script.steps[s.index]))
    return ScenarioRun(
        ep.side,
        ep.host,
        ep.offset.uncertainty_us,
        ep.to_controller(reply["t_us"]),
        ep.to_controller(reply["end_us"]),
        steps,
        tuple(fresh),
        next((c.uncertainty_us for c in ep.rec.session.clocks()), None),
    )


def together(
    runs: Sequence[tuple[Endpoint, Script, int]], lead_s: float = LEAD_S
) -> list[ScenarioRun]:
    """Start each script ``lead_s`` from now plus its shift (µs; controller time, so
    each host's start is computed from its measured offset) and run them at once.
    The first steps' ``late_us`` say how late each really began."""
    if not runs:
        return []
    start = controller_us() + int(lead_s * 1e6)
    timed = [(ep, script.starting_at(start + shift)) for ep, script, shift in runs]
    with ThreadPoolExecutor(max_workers=len(timed)) as pool:
        futures = [pool.submit(run, ep, script) for ep, script in timed]
        return [f.result() for f in futures]


def apart(first: StepRun, second: StepRun, uncertainty_us: int = 0) -> tuple[int, int]:
    """How long after ``first`` ``second`` began (µs, negative when before), and how far
    that may be off: exact on one host, else ``uncertainty_us`` (:func:`uncertainty`
    of the two runs gives it)."""
    if first.t_us is None or second.t_us is None:
        raise InputError(f"step {first.index if first.t_us is None else second.index} never ran")
    same = first.host == second.host
    return second.t_us - first.t_us, 0 if same else uncertainty_us


def uncertainty(*runs: ScenarioRun) -> int:
    """How far apart times of these runs' hosts may be off: the pair's host-to-host clock
    when both hosts' offsets were derived through it, else their offsets' uncertainties."""
    hosts = {r.host: r.uncertainty_us for r in runs}
    relative = {r.relative_us for r in runs}
    if len(hosts) == 2 and len(relative) == 1 and None not in relative:
        return relative.pop() or 0
    return sum(hosts.values())


def _step(ep: Endpoint, raw: wire.ScenarioStepResult, by_seq: dict[int, Event]) -> StepRun:
    seq = raw.get("event_seq")
    host_t = raw.get("t_us")
    return StepRun(
        index=raw["index"],
        op=raw["op"],
        result=raw["result"],
        side=ep.side,
        host=ep.host,
        name=raw.get("name"),
        id=ep.name(raw.get("id")),
        t_us=None if host_t is None else ep.to_controller(host_t),
        host_t_us=host_t,
        us=raw.get("us"),
        target_us=None if "target_us" not in raw else ep.to_controller(raw["target_us"]),
        late_us=raw.get("late_us"),
        event=None if seq is None else by_seq.get(ep.number * SEQ_STRIDE + seq),
        reply=raw.get("reply", {}),
    )


def _action(ep: Endpoint, s: StepRun, step: Step) -> Action:
    assert s.t_us is not None
    trigger = "at" if step.at_us is not None else f"on {step.on}" if step.on else "after"
    params: dict[str, Any] = {"script_step": s.index, "trigger": trigger, "late_us": s.late_us}
    if step.after_us:
        params["after_us"] = step.after_us
    params.update(step.params)
    return Action(s.t_us, ep.side, s.op, s.id, params, s.result, s.us)
