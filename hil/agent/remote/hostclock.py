"""This host's clock: every stamp the agent takes (CM events and actions, script
triggers, clock probes) is on it, so that stamps of one host compare exactly."""

from __future__ import annotations

import time


def now_us() -> int:
    """This host's CLOCK_MONOTONIC in µs."""
    return time.monotonic_ns() // 1000
