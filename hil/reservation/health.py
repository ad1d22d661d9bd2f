"""Host health as the store keeps it: a state per host and its history.

A host is ``healthy`` until an infrastructure failure (unreachable, agent
handshake failed, restore failed, a kernel crash, a failed health check)
makes it ``suspect``; ``QUARANTINE_AFTER`` consecutive failures (a store
setting) make it ``quarantined``, and a passing health check makes it
healthy again.  A quarantine set by hand stays until it is released by hand.
Reservations never hand out a pair with a quarantined host.
See docs/reliability.md, "Host health".
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, get_args

HealthState = Literal["healthy", "suspect", "quarantined"]

# What went wrong with a host's infrastructure (not with a test on it).
FailureKind = Literal[
    "unreachable",  # no SSH (connect, handshake, authentication) or no answer in time
    "agent_handshake",  # SSH works, the agent did not start or answer
    "restore_failed",  # an undo of the restore journal failed
    "kernel_crash",  # a panic or an oops seen in the host's kernel log
    "rdma_device",  # the health check found the port's RDMA device missing
    "journal",  # the health check found journal entries of a dead run
]
FAILURE_KINDS: tuple[str, ...] = get_args(FailureKind)

# What a history entry records: a failure, or one of these.
HealthEvent = FailureKind | Literal["check_passed", "quarantine", "release"]

# Consecutive infrastructure failures that quarantine a host, unless the
# store's setting says otherwise (``hil host quarantine-after N``).
QUARANTINE_AFTER = 3


def _iso(t: datetime) -> str:
    return f"{t:%Y-%m-%d %H:%M:%S} UTC"


@dataclass(frozen=True)
class HostHealth:
    """Where a host stands: its state since when and why, and its failure streak.

    ``since`` is None for a host the store never recorded anything about
    (healthy).  ``manual`` marks a quarantine set by hand.
    """

    host: str
    state: HealthState
    since: datetime | None = None
    reason: str = ""
    failures: int = 0
    manual: bool = False

    def __str__(self) -> str:
        if self.since is None:
            return f"{self.host}: {self.state}"
        text = f"{self.host}: {self.state} since {_iso(self.since)}"
        return f"{text}: {self.reason}" if self.reason else text

    def to_json(self) -> dict[str, Any]:
        """JSON-safe form, for ``hil host health --json``."""
        return {
            "host": self.host,
            "state": self.state,
            "since": self.since.isoformat() if self.since else None,
            "reason": self.reason,
            "consecutive_failures": self.failures,
            "manual": self.manual,
        }


@dataclass(frozen=True)
class HealthRecord:
    """One entry of a host's health history: what happened and the state it left."""

    host: str
    at: datetime
    event: HealthEvent
    previous: HealthState
    state: HealthState
    detail: str

    def __str__(self) -> str:
        change = self.state if self.previous == self.state else f"{self.previous} -> {self.state}"
        return f"{_iso(self.at)}  {self.event}  {change}  {self.detail}"

    def to_json(self) -> dict[str, Any]:
        """JSON-safe form, for ``hil host health HOST --json``."""
        return {
            "at": self.at.isoformat(),
            "event": self.event,
            "previous": self.previous,
            "state": self.state,
            "detail": self.detail,
        }
