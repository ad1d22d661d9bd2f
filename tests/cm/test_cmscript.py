"""Scenario scripts inside the CM worker (hil/agent/remote/cm/script.py) over fake librdmacm.

The triggers, the id references, the stamps and the malformed-script checks
are tested in-process here, with real threads and a real pollable channel fd
(tests/cm/fake_rdma.py); the same scripts run on real siw in
test_scenario_lab.py.
"""

from __future__ import annotations

import io
import json
import threading
import time
from typing import Any, cast

import pytest
from fake_rdma import FakeLib

from hil.agent import protocol
from hil.agent.remote.cm.script import ScenarioError
from hil.agent.remote.cm.server import Server
from hil.agent.remote.cm.worker import Worker
from hil.agent.remote.hostclock import now_us

CONNECT_REQUEST, ESTABLISHED, DISCONNECTED = 4, 9, 10


def later(seconds: float, fn: object, *args: object) -> threading.Thread:
    t = threading.Timer(seconds, fn, args)  # type: ignore[arg-type]
    t.start()
    return t


def push_once_waiting(w: Worker, lib: FakeLib, *event: Any) -> None:
    """Have ``event`` come while the script waits on the log for its trigger: a timer's
    could come before the script began on a loaded machine (its start stamped after it)."""
    cond = w.log.cond
    wait = cond.wait

    def waiting(timeout: float | None = None) -> bool:
        cond.wait = wait  # type: ignore[method-assign]  # the first wait only
        lib.cm.push(*event)
        return wait(timeout)

    cond.wait = waiting  # type: ignore[method-assign]


def test_an_event_triggers_a_step_on_its_own_id(worker: tuple[Worker, FakeLib]) -> None:
    """A passive script: accept the CONNECT_REQUEST's id as soon as it arrives."""
    w, lib = worker
    listener = w.listen("198.18.0.2", 7471)["id"]
    child = lib.cm.new_id()
    push_once_waiting(w, lib, CONNECT_REQUEST, child, w.ch._id(listener).ptr, 0, b"hi")
    got = w.scenario(
        steps=[
            {"op": "accept", "on": "CONNECT_REQUEST", "id_of": "event", "name": "c", "wait_s": 5},
            {"op": "disconnect", "id_of": "c", "after_us": 20_000},
        ],
    )
    protocol.OP_SCENARIO.decode(got, strict=True)
    accept, disconnect = got["steps"]
    event = next(e for e in got["log"] if e["kind"] == "event")
    assert (accept["result"], accept["event_seq"], accept["id"]) == (
        "ok",
        event["seq"],
        event["id"],
    )
    # The accept ran after the event was stamped, and says how long after.
    assert accept["target_us"] == event["host_t_us"] <= accept["t_us"]
    # Late by scheduling only: a missed wakeup would wait out the step's 5 s bound, while a
    # loaded 2-core machine has woken a thread 68 ms late.
    assert accept["late_us"] == accept["t_us"] - accept["target_us"] < 1_000_000
    # The disconnect: 20 ms after the accept returned, on the same id.
    assert disconnect["target_us"] == accept["t_us"] + accept["us"] + 20_000
    assert disconnect["t_us"] >= disconnect["target_us"] and disconnect["id"] == accept["id"]
    assert got["t_us"] <= event["host_t_us"] and got["end_us"] >= disconnect["t_us"]
    assert [n for n, _ in lib.cm.calls if n in ("rdma_accept", "rdma_disconnect")] == [
        "rdma_accept",
        "rdma_disconnect",
    ]


def test_a_step_at_a_host_time_runs_then_not_before(worker: tuple[Worker, FakeLib]) -> None:
    w, _ = worker
    at = now_us() + 150_000
    got = w.scenario(steps=[{"op": "pause", "params": {"on": False}, "at_us": at}])
    (step,) = got["steps"]
    assert step["result"] == "ok" and step["target_us"] == at <= step["t_us"]
    # Late by scheduling only: a timer read in the wrong unit or a missed wakeup is off by
    # seconds, while a loaded 2-core machine has woken this 68 ms late.
    assert step["late_us"] < 1_000_000


def test_an_event_that_never_comes_skips_the_rest_within_its_bound(
    worker: tuple[Worker, FakeLib],
) -> None:
    w, _ = worker
    h = w.ch.create_id()
    start = time.monotonic()
    got = w.scenario(
        steps=[
            {"op": "disconnect", "id": h, "on": "ESTABLISHED", "wait_s": 0.2},
            {"op": "destroy", "id": h},
        ]
    )
    assert [s["result"] for s in got["steps"]] == ["timeout", "skipped"]
    assert time.monotonic() - start < 2 and w.handles() == {"ids": [h]}


def test_a_failing_step_is_a_result_and_the_script_goes_on(worker: tuple[Worker, FakeLib]) -> None:
    w, lib = worker
    h = w.ch.create_id()
    got = w.scenario(
        steps=[
            {"op": "disconnect", "id": 42},
            {"op": "destroy", "id": h, "name": "gone"},
            {"op": "destroy", "id_of": "gone"},
        ],
    )
    results = [s["result"] for s in got["steps"]]
    assert results == ["EBADF", "ok", "EBADF"]  # the second destroy: the id is gone
    assert all("t_us" in s and "late_us" in s for s in got["steps"])


def test_events_trigger_once_each_in_arrival_order(worker: tuple[Worker, FakeLib]) -> None:
    w, lib = worker
    listener = w.listen("198.18.0.2", 7471)["id"]
    kids = [lib.cm.new_id(), lib.cm.new_id()]
    for kid in kids:
        lib.cm.push(CONNECT_REQUEST, kid, w.ch._id(listener).ptr)
    got = w.scenario(
        steps=[
            {"op": "reject", "on": "CONNECT_REQUEST", "id_of": "event"},
            {"op": "reject", "on": "CONNECT_REQUEST", "id_of": "event"},
        ],
    )
    first, second = got["steps"]
    assert first["result"] == second["result"] == "ok"
    assert first["event_seq"] < second["event_seq"] and first["id"] != second["id"]


def test_the_log_starts_after_the_callers_cursor_and_lingers(
    worker: tuple[Worker, FakeLib],
) -> None:
    w, lib = worker
    h = w.ch.create_id()
    lib.cm.push(ESTABLISHED, w.ch._id(h).ptr)
    w.events(after=0, wait=2.0, types=["ESTABLISHED"])
    later(0.1, lib.cm.push, DISCONNECTED, w.ch._id(h).ptr)
    # The linger outlasts the timer's push and the poller's read on a loaded machine too.
    got = w.scenario(steps=[{"op": "disconnect", "id": h}], after=1, linger_s=2.0)
    assert [(e["seq"], e["type"]) for e in got["log"] if e["kind"] == "event"] == [
        (2, "DISCONNECTED")
    ]


@pytest.mark.parametrize(
    ("steps", "says"),
    [
        ([], None),
        ([{"op": "bind"}], "scenario.steps[0].op"),
        ([{"op": "destroy"}], "the id goes in id or id_of"),
        ([{"op": "destroy", "id": 1, "id_of": "x"}], "id and id_of both given"),
        ([{"op": "destroy", "id_of": "x"}], "id_of 'x' names no earlier step"),
        ([{"op": "destroy", "id_of": "event"}], "id_of 'event' needs an 'on' trigger"),
        ([{"op": "pause", "at_us": 1, "on": "ESTABLISHED"}], "two triggers"),
        ([{"op": "pause", "wait_s": 1.0}], "wait_s bounds an 'on' trigger"),
        ([{"op": "connect", "id": 3, "params": {"dst": "x", "port": 1}}], "acts on no id"),
        ([{"op": "connect", "params": {"dst": "x"}}], "ConnectParams lacks port"),
        ([{"op": "destroy", "id": 1, "params": {"wait": 1}}], "DestroyParams has no wait"),
        ([{"op": "destroy", "id": 1, "params": {"order": "id_first"}}], None),
        ([{"op": "destroy", "id": 1, "params": {"order": "later"}}], "params.order"),
        ([{"op": "pause", "on": "ESTABLISHED", "on_id_of": "nope"}], "on_id_of 'nope'"),
        ([{"op": "pause", "when": 3}], "ScenarioStep has no when"),
    ],
)
def test_malformed_scripts_are_refused_before_any_step_runs(
    worker: tuple[Worker, FakeLib], steps: list[dict[str, object]], says: str | None
) -> None:
    """The same check (protocol.scenario_problems) runs on the controller before sending."""
    w, lib = worker
    problems = protocol.scenario_problems({"steps": steps})
    if says is None:
        assert problems == []
        return
    assert any(says in p for p in problems), problems
    out = io.BytesIO()
    Server(w, out)._run(1, "scenario", {"steps": steps})
    answer = json.loads(out.getvalue())["error"]
    assert answer["type"] == "bad_params" and says in answer["message"]
    assert lib.cm.calls == [] or all(n == "rdma_create_event_channel" for n, _ in lib.cm.calls)
    # Called as the server calls it, with the wire's steps unchecked: the worker checks them.
    with pytest.raises(ScenarioError):
        w.scenario(steps=cast("list[protocol.ScenarioStep]", steps))


def test_a_script_starts_at_its_start_time_and_its_first_step_says_how_late(
    worker: tuple[Worker, FakeLib],
) -> None:
    w, _ = worker
    start = now_us() + 120_000
    got = w.scenario(steps=[{"op": "pause", "params": {"on": False}}], start_us=start)
    (step,) = got["steps"]
    assert got["t_us"] == step["target_us"] == start <= step["t_us"]
    # Late by scheduling only (see test_a_step_at_a_host_time_runs_then_not_before).
    assert step["late_us"] == step["t_us"] - start < 1_000_000


def test_a_scripted_write_keeps_its_completion_and_the_destroy_follows_it(
    worker: tuple[Worker, FakeLib],
) -> None:
    """A write step (the destroy-vs-TERMINATE race's first action) answers its completion;
    the destroy after it is timed from the write's end, on the host's clock."""
    w, lib = worker
    h = w.ch.create_id()
    w.ch.create_qp(h)
    lib.verbs.wc_status = 10
    remote = {"addr": 0xBEEF000, "rkey": 0x1DD}
    got = w.scenario(
        steps=[
            {"op": "write", "id": h, "params": {"remote": remote, "length": 16, "wait": 2.0}},
            {"op": "destroy", "id": h, "after_us": 3_000},
        ]
    )
    protocol.OP_SCENARIO.decode(got, strict=True)
    write, destroy = got["steps"]
    assert write["result"] == "ok" and write["reply"]["wc_status_name"] == "IBV_WC_REM_ACCESS_ERR"
    assert destroy["result"] == "ok"
    assert destroy["target_us"] == write["t_us"] + write["us"] + 3_000 <= destroy["t_us"]
