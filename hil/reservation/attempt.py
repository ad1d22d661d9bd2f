"""Attempt markers: the store's record that a test is being tried on a pair.

A run writes a marker before each test (``Store.begin_attempt``) and closes
it with the outcome afterwards (``Store.end_attempt``).  A marker still open
when its lease is gone belongs to a run that died during that test, so the
next run can name the test that took a host down (see docs/crashes.md).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

HOST_CRASHED = "host crashed"  # a marker's outcome: a host of the pair crashed under the test
PASSED = "passed"


def _iso(t: datetime) -> str:
    return f"{t:%Y-%m-%d %H:%M:%S} UTC"


@dataclass(frozen=True)
class Attempt:
    """One test tried on one pair under one lease; ``ended`` is None while open."""

    id: int
    test: str
    pair: str
    hosts: tuple[str, str]
    lease_id: str
    holder: str  # the lease holder's text (``str(Holder)``), for people
    started: datetime
    ended: datetime | None = None
    outcome: str | None = None

    def __str__(self) -> str:
        where = f"{self.test} on pair {self.pair} ({self.hosts[0]}, {self.hosts[1]})"
        text = f"attempt {self.id}: {where} by {self.holder} started {_iso(self.started)}"
        if self.ended is None:
            return f"{text}, never ended"
        return f"{text}, ended {_iso(self.ended)}: {self.outcome}"

    def to_json(self) -> dict[str, Any]:
        """JSON-safe form, for reports and ``--json`` output."""
        return {
            "attempt": self.id,
            "test": self.test,
            "pair": self.pair,
            "hosts": list(self.hosts),
            "lease": self.lease_id,
            "holder_text": self.holder,
            "started": self.started.isoformat(),
            "ended": self.ended.isoformat() if self.ended else None,
            "outcome": self.outcome,
        }


def crashers(newest_first: Iterable[Attempt]) -> dict[str, Attempt]:
    """The tests whose newest decisive marker says they crashed a host: test -> that marker.

    Decisive are ``host crashed`` and ``passed``: a later pass clears a test
    (docs/crashes.md); a skip, a failure or a dead run says nothing either way.
    """
    decided: dict[str, Attempt] = {}
    for attempt in newest_first:
        if attempt.outcome in (HOST_CRASHED, PASSED):
            decided.setdefault(attempt.test, attempt)
    return {test: a for test, a in decided.items() if a.outcome == HOST_CRASHED}
