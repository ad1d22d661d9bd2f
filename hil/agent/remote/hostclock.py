"""This host's clock: every stamp the agent takes (CM events and actions, script
triggers, clock probes) is on it, so that stamps of one host compare exactly."""

from __future__ import annotations

import time

from ..protocol import TimedReply


def now_us() -> int:
    """This host's CLOCK_MONOTONIC in µs."""
    return time.monotonic_ns() // 1000


def since(t0: int) -> TimedReply:
    """The timing every timed reply starts with: began at ``t0``, took until now (µs)."""
    return {"t_us": t0, "us": now_us() - t0}


def stamp(e: Exception, t0: int) -> None:
    """Stamp a failed operation's exception with its timing (``t_us``, ``us``: as
    :func:`since`'s), which the worker's error reply carries (cm/server.py, ``CMErrorDetails``)."""
    e.t_us, e.us = t0, now_us() - t0  # type: ignore[attr-defined]
