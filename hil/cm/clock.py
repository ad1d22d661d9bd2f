"""A host's clock offset to the controller, estimated over the agent channel.

Timelines put every host's events on the controller's CLOCK_MONOTONIC (µs).
Each round trip asks the agent for its CLOCK_MONOTONIC (``cm_now``) between
two readings of ours; the host read its clock somewhere inside that window,
so ``offset = midpoint - host_time`` is off by at most half the round trip.
Several rounds, and the one with the smallest round trip wins (queueing
on SSH, the guest or our own threads only ever widens the window).

:func:`wall_sample` ties a host's wall clock to its monotonic clock (the
agent's ``clock_pair``): a capture's packets carry wall-clock stamps.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from hil.agent.client import Caller, request
from hil.agent.remote import protocol as wire
from hil.errors import InputError
from hil.judge.timeline import ClockOffset, WallSample

DEFAULT_ROUNDS = 7
CALL_TIMEOUT = 10.0


def controller_us() -> int:
    """The controller's CLOCK_MONOTONIC in µs: the time base of every timeline."""
    return time.monotonic_ns() // 1000


def estimate(
    host: str, host_now_us: Callable[[], int], rounds: int = DEFAULT_ROUNDS
) -> ClockOffset:
    """``host``'s offset from ``rounds`` round trips of ``host_now_us`` (the tightest wins)."""
    if rounds < 1:
        raise InputError(f"clock offset of {host}: rounds must be >= 1, not {rounds}")
    best: tuple[int, int] | None = None  # (rtt, offset)
    for _ in range(rounds):
        t0 = controller_us()
        h = host_now_us()
        t1 = controller_us()
        rtt = t1 - t0
        if best is None or rtt < best[0]:
            best = (rtt, (t0 + t1) // 2 - h)
    assert best is not None
    rtt, offset = best
    return ClockOffset(host=host, offset_us=offset, uncertainty_us=(rtt + 1) // 2)


def agent_now(agent: Caller) -> Callable[[], int]:
    """A ``host_now_us`` for :func:`estimate` through an agent's ``cm_now``."""

    def now() -> int:
        return request(agent, wire.CM_NOW, wire.NoParams(), CALL_TIMEOUT)["t_us"]

    return now


def wall_sample(agent: Caller) -> WallSample:
    """The agent host's CLOCK_REALTIME at a known point of its CLOCK_MONOTONIC (``clock_pair``)."""
    got = request(agent, wire.CLOCK_PAIR, wire.NoParams(), CALL_TIMEOUT)
    return WallSample(agent.host, got["wall_us"], got["mono_us"], got["spread_us"])
