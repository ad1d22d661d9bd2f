"""What a reservation is made of: who holds it, what is claimed, the lease.

Plain frozen data; the stores build these from their rows.
"""

from __future__ import annotations

import getpass
import os
import socket
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any

from hil.errors import InputError


def _ci_job_url() -> str | None:
    """The URL of the CI job we run in, from the usual CI variables."""
    for var in ("CI_JOB_URL", "BUILD_URL", "BUILDKITE_BUILD_URL"):
        if os.environ.get(var):
            return os.environ[var]
    server, repo, run = (
        os.environ.get(v) for v in ("GITHUB_SERVER_URL", "GITHUB_REPOSITORY", "GITHUB_RUN_ID")
    )
    if server and repo and run:
        return f"{server}/{repo}/actions/runs/{run}"
    return None


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # a container uid without a passwd entry
        return f"uid{os.getuid()}"


@dataclass(frozen=True)
class Holder:
    """Who holds a lease: enough for a colleague to find the run and its owner."""

    user: str
    hostname: str
    pid: int
    ci_job_url: str | None = None
    note: str | None = None

    @classmethod
    def current(cls, note: str | None = None) -> Holder:
        """This process, with the CI job URL when the environment names one."""
        return cls(_user(), socket.gethostname(), os.getpid(), _ci_job_url(), note)

    def __str__(self) -> str:
        text = f"{self.user}@{self.hostname} pid {self.pid}"
        if self.note:
            text += f" ({self.note})"
        if self.ci_job_url:
            text += f" <{self.ci_job_url}>"
        return text

    def to_json(self) -> dict[str, Any]:
        """A JSON-safe dict; ``from_json`` reads it back."""
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Holder:
        """The holder stored by ``to_json``."""
        return cls(
            user=str(data["user"]),
            hostname=str(data["hostname"]),
            pid=int(data["pid"]),
            ci_job_url=data.get("ci_job_url"),
            note=data.get("note"),
        )


@dataclass(frozen=True)
class Claim:
    """A pair one may take: its name and the two hosts that taking it locks."""

    pair: str
    hosts: tuple[str, str]

    def __post_init__(self) -> None:
        if len(self.hosts) != 2 or not all(self.hosts) or not self.pair:
            raise InputError(f"a claim needs a pair name and two host names, got {self!r}")

    def __str__(self) -> str:
        return f"{self.pair} ({self.hosts[0]}, {self.hosts[1]})"


def _iso(t: datetime) -> str:
    return t.isoformat(timespec="seconds")


@dataclass(frozen=True)
class Lease:
    """A pair held by a holder until ``expires``, unless renewed.

    ``token`` is the lease's fencing token: larger for every lease the store
    grants later (a takeover included), 0 for a lease of a store made before
    fencing tokens.
    """

    id: str
    pair: str
    hosts: tuple[str, str]
    holder: Holder
    acquired: datetime
    expires: datetime
    ttl: float
    token: int = 0

    def __str__(self) -> str:
        return (
            f"lease {self.id}: pair {self.pair} ({self.hosts[0]}, {self.hosts[1]}) "
            f"held by {self.holder} since {_iso(self.acquired)} until {_iso(self.expires)}"
        )

    def to_json(self) -> dict[str, Any]:
        """The JSON object ``hil reserve --json`` and ``hil status --json`` print."""
        return {
            "lease": self.id,
            "pair": self.pair,
            "hosts": list(self.hosts),
            "holder": self.holder.to_json(),
            "holder_text": str(self.holder),
            "acquired": self.acquired.isoformat(),
            "expires": self.expires.isoformat(),
            "ttl": self.ttl,
            "token": self.token,
        }


@dataclass(frozen=True)
class Ticket:
    """A waiter's place in the queue for any of its claims."""

    id: str
    seq: int
    claims: tuple[Claim, ...]
    holder: Holder
    created: datetime
    expires: datetime

    def to_json(self) -> dict[str, Any]:
        """JSON-safe form, for ``hil status --json``."""
        return {
            "ticket": self.id,
            "position": self.seq,
            "pairs": [c.pair for c in self.claims],
            "holder": self.holder.to_json(),
            "holder_text": str(self.holder),
            "since": self.created.isoformat(),
        }


@dataclass(frozen=True)
class JournalEntry:
    """One restore-journal record of a host (its meaning belongs to its writer)."""

    id: int
    host: str
    lease_id: str
    created: datetime
    entry: dict[str, Any]


def utc(ts: float) -> datetime:
    """A store timestamp (seconds since the epoch) as an aware UTC datetime."""
    return datetime.fromtimestamp(ts, tz=UTC)
