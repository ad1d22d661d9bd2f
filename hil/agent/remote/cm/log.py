"""A CM worker's log: its channel's events and its own actions, in arrival order.

The poller appends every event as it reads it (stamped on this host's
CLOCK_MONOTONIC); operations and scripts wait on the log for the events
they need.
"""

from __future__ import annotations

import threading
import time

from ...protocol import CMEventType, CMLogEntry


class Log:
    """Events and the worker's own actions (auto accept/reject), in arrival order."""

    def __init__(self) -> None:
        self.entries: list[CMLogEntry] = []
        self.cond = threading.Condition()

    def add(self, entry: CMLogEntry) -> CMLogEntry:
        """Append ``entry``, numbering it (its ``seq``, 1 for the first)."""
        with self.cond:
            entry["seq"] = len(self.entries) + 1
            self.entries.append(entry)
            self.cond.notify_all()
        return entry

    def wait(
        self, after: int, types: list[CMEventType] | None, handle: int | None, timeout: float
    ) -> list[CMLogEntry]:
        """Entries after ``after``, once one matches (or at the timeout): any entry
        when neither ``types`` nor ``handle`` is given, else an event of ``types``
        (any if empty) for ``handle`` (any if None)."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                fresh = self.entries[after:]
                if any(matches(e, types, handle) for e in fresh):
                    return fresh
                left = deadline - time.monotonic()
                if left <= 0:
                    return fresh
                self.cond.wait(left)


def matches(entry: CMLogEntry, types: list[CMEventType] | None, handle: int | None) -> bool:
    """True when ``entry`` is what :meth:`Log.wait` waits for with these ``types`` and
    ``handle``."""
    if not types and handle is None:
        return True
    return (
        entry["kind"] == "event"
        and (not types or entry["type"] in types)
        and (handle is None or entry["id"] == handle)
    )
