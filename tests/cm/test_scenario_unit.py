"""The controller's side of scenarios (hil/cm/scenario.py) against real CM workers.

Each endpoint's agent here hands ``cm_call`` to a real ``cm.worker.Worker``
through its JSON server, over the fake librdmacm (tests/cm/fake_rdma.py): the
script is built and checked on the controller, crosses the protocol as JSON,
runs in the worker and comes back decoded and recorded.  On real siw:
test_scenario_lab.py.
"""

from __future__ import annotations

import io
import json
import threading
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from fake_rdma import FakeLib

from hil.agent.client import AgentCallError
from hil.agent.remote.cm.server import Server
from hil.agent.remote.cm.worker import Worker
from hil.agent.remote.librdmacm import CMChannel
from hil.cm.endpoint import Endpoint
from hil.cm.scenario import Script, Step, apart, run, together, uncertainty
from hil.errors import InputError, RemoteError
from hil.judge.timeline import Action, ClockOffset, Event, RelativeClock

CONNECT_REQUEST = 4


class WorkerAgent:
    """One host's agent: ``cm_call`` answered by a real worker's JSON server."""

    def __init__(self, host: str, worker: Worker) -> None:
        self.host, self.worker = host, worker

    def call(self, method: str, timeout: float = 30.0, **params: Any) -> Any:
        assert method == "cm_call"
        out = io.BytesIO()
        Server(self.worker, out)._run(1, params["op"], json.loads(json.dumps(params["params"])))
        answer = json.loads(out.getvalue())
        if "error" in answer:
            err = dict(answer["error"])
            raise AgentCallError(self.host, method, err.pop("type"), err.pop("message"), err)
        return answer["result"]


class Pair:
    """The part of a session (hil.cm.interfaces.PairView) a script's run reads."""

    def __init__(self, *clocks: RelativeClock) -> None:
        self._clocks = clocks

    def clocks(self) -> tuple[RelativeClock, ...]:
        return self._clocks


class Rec:
    """What an endpoint records into (hil.cm.interfaces.Recorder)."""

    session = Pair()

    def __init__(self) -> None:
        self.actions: list[Action] = []
        self._events: list[Event] = []

    def add_action(self, action: Action) -> None:
        self.actions.append(action)

    def add_events(self, batch: Sequence[Event]) -> None:
        self._events += batch

    def events(self) -> list[Event]:
        return sorted(self._events, key=lambda e: (e.t_us, e.seq))


@pytest.fixture
def workers() -> Iterator[list[tuple[Worker, FakeLib]]]:
    made, pollers = [], []
    for _ in range(2):
        lib = FakeLib()
        w = Worker(CMChannel(lib))  # type: ignore[arg-type]
        pollers.append(threading.Thread(target=w.poller.run, daemon=True))
        pollers[-1].start()
        made.append((w, lib))
    yield made
    for (w, _), poller in zip(made, pollers, strict=True):
        w.poller.closing.set()
        poller.join(2)
        w.close()


def endpoint(rec: Rec, side: str, worker: Worker, offset_us: int = 0) -> Endpoint:
    host = f"h-{side}"
    agent = WorkerAgent(host, worker)
    return Endpoint(rec, side, host, agent, ClockOffset(host, offset_us, 300), 1, 4242)  # type: ignore[arg-type]


def test_steps_go_out_as_the_hosts_handles_and_clock(workers: list[tuple[Worker, FakeLib]]) -> None:
    (w, _), _ = workers
    ep = endpoint(Rec(), "b", w, offset_us=5_000_000)  # host clock = controller - 5 s
    step = Step("destroy", cm_id="b:1.7", at_us=9_000_000, after_us=40)
    assert step.to_wire(ep) == {"op": "destroy", "id": 7, "at_us": 4_000_000, "after_us": 40}
    with pytest.raises(InputError, match=r"scenario for h-b: .*id_of 'c' names no earlier step"):
        Script((Step("destroy", id_of="c"),)).to_wire(ep)
    with pytest.raises(RemoteError, match="cm_id a:1.7 is not on endpoint b:1"):
        Step("destroy", cm_id="a:1.7").to_wire(ep)
    assert Script((Step("pause"),)).starting_at(6_000_000).to_wire(ep)["start_us"] == 1_000_000


def test_a_run_is_recorded_like_calls_and_events_come_once(
    workers: list[tuple[Worker, FakeLib]],
) -> None:
    (w, lib), _ = workers
    rec = Rec()
    ep = endpoint(rec, "b", w, offset_us=1_000)
    listener = w.listen("198.18.0.2", 7471)["id"]
    kid = lib.cm.new_id()
    threading.Timer(0.1, lib.cm.push, (CONNECT_REQUEST, kid, w.ch._id(listener).ptr)).start()
    script = Script(
        (Step("accept", on="CONNECT_REQUEST", id_of="event", name="c", params={}),),
        linger_s=0.05,
    )
    got = run(ep, script)
    (step,) = got.steps
    assert step.ok and step.id == got.events[0].id and step.event == got.events[0]
    assert step.t_us == step.host_t_us + 1_000 and step.late_us is not None  # type: ignore[operator]
    assert step.event.t_us <= step.t_us and step.reply["qp"]["rkey"] == 22
    (action,) = rec.actions
    assert (action.name, action.id, action.t_us, action.result) == (
        "accept",
        step.id,
        step.t_us,
        "ok",
    )
    assert action.params["trigger"] == "on CONNECT_REQUEST" and action.params["script_step"] == 0
    assert ep.collect() == [] and len(rec.events()) == 1  # the script's events, recorded once
    assert got.step("c") is step and got.start_us <= step.t_us <= got.end_us


def test_scripts_start_together_and_the_gap_is_read_back(
    workers: list[tuple[Worker, FakeLib]],
) -> None:
    (wa, _), (wb, _) = workers
    rec = Rec()
    a, b = endpoint(rec, "a", wa), endpoint(rec, "b", wb)
    ra, rb = together(
        [(a, Script((Step("pause", params={"on": False}),)), 0),
         (b, Script((Step("pause", params={"on": False}),)), 80_000)],
        lead_s=0.2,
    )  # fmt: skip
    gap, off = apart(ra.steps[0], rb.steps[0], uncertainty(ra, rb))
    late = (ra.steps[0].late_us or 0) + (rb.steps[0].late_us or 0)
    assert off == 600 and abs(gap - 80_000) <= late + 1
    assert rb.steps[0].target_us - ra.steps[0].target_us == 80_000  # type: ignore[operator]
    assert [x.name for x in rec.actions] == ["pause", "pause"]


def test_two_hosts_known_to_each_other_are_apart_by_their_relative_clock(
    workers: list[tuple[Worker, FakeLib]],
) -> None:
    """Host B's offset derived from A's through the host-to-host clock: two runs' times
    compare to that clock's uncertainty, not the sum of both offsets'."""
    (wa, _), (wb, _) = workers
    rec = Rec()
    rec.session = Pair(RelativeClock("h-a", "h-b", 0, 250))
    a, b = endpoint(rec, "a", wa), endpoint(rec, "b", wb)
    ra, rb = together(
        [(a, Script((Step("pause", params={"on": False}),)), 0),
         (b, Script((Step("pause", params={"on": False}),)), 0)],
        lead_s=0.2,
    )  # fmt: skip
    assert (ra.relative_us, uncertainty(ra, rb)) == (250, 250)
    assert uncertainty(ra, ra) == 300  # one host: its own offset's
