"""The agent's CM operations on this machine (no RDMA here: the failure paths are real).

The CM engine's behaviour against real RDMA is tested on the virtual lab
(tests/cm/test_sequences_lab.py); here the real agent runs locally.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from agenttest import StrictAgent

from hil.agent.build import build
from hil.agent.client import AgentCallError
from hil.agent.remote.cm.methods import start_bound
from hil.cm.clock import wall_sample


@pytest.fixture(scope="module")
def local_agent() -> Iterator[StrictAgent]:
    with StrictAgent.local(name="here") as agent:
        yield agent


def test_cm_now_is_this_hosts_monotonic_clock_in_us(local_agent: StrictAgent) -> None:
    before = time.monotonic_ns() // 1000
    got = local_agent.call("cm_now")["t_us"]
    after = time.monotonic_ns() // 1000
    assert before <= got <= after  # same host, same CLOCK_MONOTONIC


def test_clock_pair_ties_the_wall_clock_to_the_monotonic_clock(local_agent: StrictAgent) -> None:
    mono_before, wall_before = time.monotonic_ns() // 1000, time.time_ns() // 1000
    got = wall_sample(local_agent)
    mono_after, wall_after = time.monotonic_ns() // 1000, time.time_ns() // 1000
    assert got.host == "here"
    assert mono_before <= got.mono_us <= mono_after  # same host, same clocks
    assert wall_before <= got.wall_us <= wall_after
    assert 0 <= got.spread_us < 10_000  # three clock reads, the tightest of a few tries
    # The agent's wall - mono agrees with ours, to the two windows.
    ours = (wall_before - mono_before, wall_after - mono_after)
    slack = got.spread_us + (mono_after - mono_before)
    assert min(ours) - slack <= got.wall_us - got.mono_us <= max(ours) + slack


def test_cm_open_without_rdma_says_why_in_one_line(local_agent: StrictAgent) -> None:
    with pytest.raises(AgentCallError) as info:
        local_agent.call("cm_open", timeout=30)
    assert info.value.kind == "rdma_unavailable"
    assert "cannot open an RDMA CM channel: rdma_create_event_channel" in str(info.value)
    assert "\n" not in str(info.value)
    assert local_agent.call("cm_endpoints") == []  # the failed worker is not kept


@pytest.mark.parametrize(
    "method, params", [("cm_call", {"op": "events"}), ("cm_kill", {}), ("cm_close", {})]
)
def test_unknown_endpoint_is_not_found(
    local_agent: StrictAgent, method: str, params: dict[str, Any]
) -> None:
    with pytest.raises(
        AgentCallError, match="no CM endpoint 99 \\(open one with cm_open\\)"
    ) as info:
        local_agent.call(method, endpoint=99, **params)
    assert info.value.kind == "not_found"


def test_cm_methods_are_announced(local_agent: StrictAgent) -> None:
    assert {"cm_now", "cm_open", "cm_call", "cm_kill", "cm_close", "cm_endpoints"} <= set(
        local_agent.hello.methods
    )


@pytest.mark.parametrize("call, start", [(30.0, 20.0), (120.0, 110.0), (4.0, 2.0)])
def test_a_workers_start_gets_the_calls_bound_less_the_time_to_answer(
    call: float, start: float
) -> None:
    # A debug lab's TCG guest took over 20 s to start one (the old fixed bound).
    assert start_bound(call) == start


def test_workers_start_from_the_unpacked_agent_whose_bytecode_is_cached(
    local_agent: StrictAgent,
) -> None:
    # The worker fails here (no RDMA) only after importing cm/worker.py, which the agent
    # itself never imports: its bytecode beside the unpacked copy shows where it came from.
    unpacked = build().path.with_suffix("")
    with pytest.raises(AgentCallError):
        local_agent.call("cm_open", timeout=30)
    assert list((unpacked / "hil_agent" / "remote" / "cm" / "__pycache__").glob("worker.*.pyc"))
