"""Clock probes between two real agents on this machine (UDP over loopback).

Both agents read the same CLOCK_MONOTONIC, so the true offset between them
is 0: every estimate's window must contain it.  On the virtual lab the two
guests' clocks differ for real (tests/cm/test_clock_lab.py).
"""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest
from agenttest import StrictAgent

from hil.agent.client import AgentCallError
from hil.cm import clock
from hil.errors import RemoteError


@pytest.fixture(scope="module")
def agents() -> Iterator[tuple[StrictAgent, StrictAgent]]:
    with StrictAgent.local(name="here-a") as a, StrictAgent.local(name="here-b") as b:
        yield a, b


def _free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_probes_between_two_agents_bound_the_true_offset_of_zero(
    agents: tuple[StrictAgent, StrictAgent], monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = agents
    # Each round trip wakes both agents: on a loaded machine 50 of them can outlast a lab
    # link's budget (0.25 s); the count asked for is what is checked here, not the budget.
    monkeypatch.setattr(clock, "PROBE_BUDGET_S", 10.0)
    samples = clock.probe_samples(
        clock.Peer("here-a", a, "127.0.0.1"), clock.Peer("here-b", b, "127.0.0.1"),
        _free_udp_port(), count=50,
    )  # fmt: skip
    assert len(samples) == 50
    for t1, t2, t3, t4 in samples:
        assert t1 <= t2 <= t3 <= t4  # one clock: causality shows in the raw stamps
    rc = clock.relative("here-a", "here-b", samples)
    assert abs(rc.offset_us) <= rc.uncertainty_us
    assert {"clock_echo", "clock_probe"} <= a.checked | b.checked


def test_probes_without_an_echo_fail_naming_both_hosts_and_what_to_check(
    agents: tuple[StrictAgent, StrictAgent], monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = agents
    monkeypatch.setattr(clock, "ECHO_WAIT_S", 0.3)  # no answer is coming: wait less
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as taken:
        # The port is ours: the echo cannot bind it, and we answer no probe.
        taken.bind(("127.0.0.1", 0))
        port = taken.getsockname()[1]
        with pytest.raises(RemoteError) as info:
            clock.probe_samples(
                clock.Peer("here-a", a, "127.0.0.1"), clock.Peer("here-b", b, "127.0.0.1"), port, 5
            )
    text = str(info.value)
    assert text.startswith(f"here-a: clock probes to here-b (127.0.0.1 UDP {port}): none of ")
    assert "; the echo on here-b failed: " in text
    assert f"clock_echo: cannot bind 127.0.0.1:{port}: Address already in use" in text
    assert "data link is up and passes UDP" in text


def test_bad_params_are_refused_in_one_line(agents: tuple[StrictAgent, StrictAgent]) -> None:
    a, _ = agents
    with pytest.raises(AgentCallError, match="clock_probe: count must be 1..2000, not 0"):
        a.call("clock_probe", src="127.0.0.1", dst="127.0.0.1", port=9, count=0, budget_s=1)
    with pytest.raises(AgentCallError, match="'not-an-ip' is not an IP address") as info:
        a.call("clock_echo", 1.0, address="not-an-ip", port=9)
    assert info.value.kind == "bad_params"
