"""Clocks: each host's offset to the controller, and the two hosts' clocks to each other.

Timelines put every host's events on the controller's CLOCK_MONOTONIC (µs).

:func:`estimate` measures a host's offset over the agent channel: each round
reads the controller's clock, asks the host's (``cm_now``), reads ours
again.  The host read its clock inside that window, so the offset lies in
``[t0 - h, t1 - h]``; every round bounds it, and the intersection of all the
rounds' windows is the estimate (never wider than the tightest round's: half
its round trip).  Queueing on SSH, the guest or our own threads only ever
widens a window.  On a TCG guest that is milliseconds.

:func:`relative` does the same between the two hosts of a pair, from stamped
UDP probes over their data link (``clock_probe`` on host A, ``clock_echo``
on host B, agent module ``clockpeer``): B's clock minus A's lies in
``[t3 - t4, t2 - t1]`` for every probe, and the intersection wins.  The link
is one hop, so this is tens to hundreds of µs where SSH gives milliseconds,
and the order of two events on the two hosts needs only this relative clock
(:class:`hil.judge.timeline.RelativeClock`).  :func:`through` derives host
B's controller offset from A's and the relative clock, so a timeline's
cross-host comparisons are as good as the relative clock.

:func:`wall_sample` ties a host's wall clock to its monotonic clock (the
agent's ``clock_pair``): a capture's packets carry wall-clock stamps.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from hil.agent import protocol as wire
from hil.agent.client import Caller, request
from hil.errors import AgentError, InputError, RemoteError
from hil.judge.timeline import ClockOffset, RelativeClock, WallSample

DEFAULT_ROUNDS = 7
DEFAULT_PROBES = 64  # host-to-host probes per measurement, at most
# What a measurement of DEFAULT_PROBES may take at most from its first answer (they
# usually take less): each recording pays it, about what host A's SSH round trips take.
PROBE_BUDGET_S = 0.25
ECHO_WAIT_S = 3.0  # for the first answer: the echo's call may reach its host late
CALL_TIMEOUT = 10.0
ECHO_SLACK_S = 1.0  # the echo outlives the prober by this (a late stop datagram)


def controller_us() -> int:
    """The controller's CLOCK_MONOTONIC in µs: the time base of every timeline."""
    return time.monotonic_ns() // 1000


@dataclass(frozen=True)
class Bounds:
    """What a set of samples says of an offset: it lies in ``[low, high]`` (µs)."""

    low: int
    high: int
    samples: int
    best_rtt_us: int  # the tightest single sample's round trip

    @property
    def middle(self) -> int:
        """The estimate: the window's midpoint."""
        return (self.low + self.high) // 2

    @property
    def half_width(self) -> int:
        """The estimate's uncertainty: half the window, rounded up, at least 1 µs."""
        return max(1, -(-abs(self.high - self.low) // 2))


def intersect(windows: Sequence[tuple[int, int]]) -> Bounds:
    """The offset window every sample's ``(low, high)`` allows.

    Clocks that drift during the measurement can make the windows miss each
    other by a few µs (low > high): the midpoint is still the estimate and
    the gap its uncertainty.
    """
    if not windows:
        raise InputError("clock estimate: no samples")
    low = max(lo for lo, _ in windows)
    high = min(hi for _, hi in windows)
    return Bounds(low, high, len(windows), min(hi - lo for lo, hi in windows))


def estimate(
    host: str, host_now_us: Callable[[], int], rounds: int = DEFAULT_ROUNDS
) -> ClockOffset:
    """``host``'s offset from ``rounds`` round trips of ``host_now_us`` (windows intersected)."""
    return offset_of(host, ssh_windows(host_now_us, rounds))


def ssh_windows(host_now_us: Callable[[], int], rounds: int) -> list[tuple[int, int]]:
    """``rounds`` round trips' offset windows ``(t0 - h, t1 - h)``."""
    if rounds < 1:
        raise InputError(f"clock offset: rounds must be >= 1, not {rounds}")
    windows = []
    for _ in range(rounds):
        t0 = controller_us()
        h = host_now_us()
        t1 = controller_us()
        windows.append((t0 - h, t1 - h))
    return windows


def offset_of(host: str, windows: Sequence[tuple[int, int]]) -> ClockOffset:
    """A host's :class:`ClockOffset` from its round trips' windows."""
    b = intersect(windows)
    return ClockOffset(host=host, offset_us=b.middle, uncertainty_us=b.half_width)


def probe_windows(samples: Sequence[Sequence[int]]) -> list[tuple[int, int]]:
    """Each probe ``[t1, t2, t3, t4]``'s window for ``A - B`` (A probed, B echoed):
    ``A - B`` lies in ``[t1 - t2, t4 - t3]``."""
    windows = []
    for sample in samples:
        t1, t2, t3, t4 = sample
        if t4 < t1 or t3 < t2:
            raise InputError(f"clock probe: stamps out of order: {list(sample)}")
        windows.append((t1 - t2, t4 - t3))
    return windows


def relative(host_a: str, host_b: str, samples: Sequence[Sequence[int]]) -> RelativeClock:
    """``host_a``'s clock against ``host_b``'s from probes A sent and B echoed."""
    b = intersect(probe_windows(samples))
    return RelativeClock(host_a, host_b, b.middle, b.half_width)


def through(a: ClockOffset, rc: RelativeClock) -> ClockOffset:
    """Host B's controller offset from host A's and their relative clock."""
    if a.host != rc.host_a:
        raise InputError(f"clock of {rc.host_b}: {a.host} is not {rc.host_a}")
    return ClockOffset(rc.host_b, a.offset_us + rc.offset_us, a.uncertainty_us + rc.uncertainty_us)


@dataclass(frozen=True)
class Peer:
    """One host of a probe exchange: its name, agent and data address."""

    host: str
    agent: Caller
    address: str


def probe_budget_s(count: int) -> float:
    """How long ``count`` probes may take: :data:`PROBE_BUDGET_S` per default count, and
    never less (the echo's call may reach its host tens of ms after the probe's)."""
    return PROBE_BUDGET_S * max(1.0, count / DEFAULT_PROBES)


def probe_samples(a: Peer, b: Peer, port: int, count: int = DEFAULT_PROBES) -> list[list[int]]:
    """Up to ``count`` probes from ``a`` to an echo on ``b`` over their data link (UDP
    ``port``) within :func:`probe_budget_s` of the first answer (which may take up to
    :data:`ECHO_WAIT_S`): every answered probe's stamps.  Raises :class:`RemoteError`
    when none was answered."""
    budget = probe_budget_s(count)
    bound = ECHO_WAIT_S + budget
    echo: dict[str, object] = {}

    def serve() -> None:
        try:
            params = wire.ClockEchoParams(address=b.address, port=port)
            echo["reply"] = request(b.agent, wire.CLOCK_ECHO, params, bound + ECHO_SLACK_S)
        except AgentError as e:
            echo["error"] = e

    thread = threading.Thread(target=serve, name=f"clock-echo-{b.host}", daemon=True)
    thread.start()
    try:
        params = wire.ClockProbeParams(
            src=a.address, dst=b.address, port=port, count=count, budget_s=budget
        )
        got = request(a.agent, wire.CLOCK_PROBE, params, bound)
    finally:
        thread.join(bound + ECHO_SLACK_S + CALL_TIMEOUT)
    if not got["samples"]:
        why = f"; the echo on {b.host} failed: {echo['error']}" if "error" in echo else ""
        raise RemoteError(
            a.host,
            f"clock probes to {b.host} ({b.address} UDP {port}): none of {got['sent']} "
            f"answered within {bound:g}s{why}; check that the pair's data link is "
            "up and passes UDP",
        )
    return got["samples"]


def agent_now(agent: Caller) -> Callable[[], int]:
    """A ``host_now_us`` for :func:`estimate` through an agent's ``cm_now``."""

    def now() -> int:
        return request(agent, wire.CM_NOW, wire.NoParams(), CALL_TIMEOUT)["t_us"]

    return now


def wall_sample(agent: Caller) -> WallSample:
    """The agent host's CLOCK_REALTIME at a known point of its CLOCK_MONOTONIC (``clock_pair``)."""
    got = request(agent, wire.CLOCK_PAIR, wire.NoParams(), CALL_TIMEOUT)
    return WallSample(agent.host, got["wall_us"], got["mono_us"], got["spread_us"])
