"""The host health check, and recording what it and a run see in the store.

A host passes when SSH runs ``true``, its agent answers a ping after the
handshake, each inventory port's RDMA device is there (or is one that pair
setup creates) and its restore journal holds nothing of a dead run.  The
result feeds the host's health in the store (:mod:`hil.reservation.health`):
a pass makes it healthy, a failure counts as an infrastructure failure.

What "RDMA device present" means per port:

- the inventory's ``rdma_device``, or the ``siw_<netdev>`` fallback, is
  there: ``ok``;
- the port has a ``fallback: siw`` and no device yet: ``n/a`` (pair setup
  creates it, and the restore deletes it again, so a healthy idle host has
  none), unless the host has no RDMA at all (no RDMA netlink): ``fail``;
- the port names neither ``rdma_device`` nor a fallback: ``n/a``;
- ``rdma=False`` (hosts without RDMA, such as the netns lab): ``n/a``, said so.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from hil import tools
from hil.agent.client import AgentCallError
from hil.errors import AgentError, CommandFailed, HilError, RemoteError, SSHError
from hil.host.hosts import Hosts
from hil.host.rdmadev import missing_device, plan_device, rdma_ports

if TYPE_CHECKING:
    from hil.host.journal import UndoReport
    from hil.inventory.model import Inventory, Rnic
    from hil.reservation.health import FailureKind, HostHealth
    from hil.reservation.store import Store

log = logging.getLogger(__name__)

# Bound of the SSH probe (``true``), on top of the inventory's connect_timeout.
SSH_TIMEOUT = 10.0
# Hosts checked at once by a health round.
ROUND_WORKERS = 8

CheckName = Literal["ssh", "agent", "rdma", "journal"]
CheckStatus = Literal["ok", "fail", "n/a"]

# The failure a failing check records in the store.
FAILURE_OF: dict[CheckName, FailureKind] = {
    "ssh": "unreachable",
    "agent": "agent_handshake",
    "rdma": "rdma_device",
    "journal": "journal",
}


@dataclass(frozen=True)
class Check:
    """One check of a host: its name, outcome and what was seen."""

    name: CheckName
    status: CheckStatus
    seen: str


@dataclass(frozen=True)
class HealthCheck:
    """Every check of one host, in order (those after a failed SSH or agent are ``n/a``)."""

    host: str
    checks: tuple[Check, ...]

    @property
    def failure(self) -> Check | None:
        """The first failing check, or None."""
        return next((c for c in self.checks if c.status == "fail"), None)

    @property
    def ok(self) -> bool:
        """True when no check failed."""
        return self.failure is None

    def summary(self) -> str:
        """``ssh ok, agent ok, rdma n/a, journal ok``: the history's detail of a pass."""
        return ", ".join(f"{c.name} {c.status}" for c in self.checks)

    def to_json(self) -> dict[str, Any]:
        """JSON-safe form, for ``hil lab-check --json``."""
        return {
            "host": self.host,
            "ok": self.ok,
            "checks": [{"check": c.name, "status": c.status, "seen": c.seen} for c in self.checks],
        }


def check_host(hosts: Hosts, store: Store, name: str, rdma: bool = True) -> HealthCheck:
    """Check host ``name`` (see the module doc); every step is bounded, nothing changes."""
    checks = [_ssh(hosts, name)]
    if checks[-1].status == "ok":
        checks.append(_agent(hosts, name))
    if checks[-1].status == "ok":
        checks += _rdma(hosts, name, rdma)
    else:
        why = f"not checked: {checks[-1].name} failed"
        done = {c.name for c in checks}
        checks += [Check(n, "n/a", why) for n in ("agent", "rdma") if n not in done]
    checks.append(_journal(store, name))
    return HealthCheck(name, tuple(checks))


def _ssh(hosts: Hosts, name: str) -> Check:
    try:
        hosts.session(name).run(tools.argv("true"), timeout=SSH_TIMEOUT)
    except HilError as e:
        return Check("ssh", "fail", str(e))
    return Check("ssh", "ok", "ran true")


def _agent(hosts: Hosts, name: str) -> Check:
    try:
        pid = hosts.agent(name).ping()
    except HilError as e:
        return Check("agent", "fail", str(e))
    return Check("agent", "ok", f"handshake and ping (agent pid {pid})")


def _rdma(hosts: Hosts, name: str, rdma: bool) -> list[Check]:
    rnics = hosts.host(name).rnics
    if not rdma:
        return [Check("rdma", "n/a", "not checked: RDMA off (--no-rdma)")]
    if not rnics:
        return [Check("rdma", "n/a", "the inventory lists no RNIC port")]
    try:
        ports, unavailable = rdma_ports(hosts.agent(name))
    except HilError as e:
        return [Check("rdma", "fail", f"listing RDMA devices failed: {e}")]
    present = {p.device for p in ports}
    return [_port(rnic, present, unavailable) for rnic in rnics]


def _port(rnic: Rnic, present: set[str], unavailable: str) -> Check:
    where = f"port {rnic.name} ({rnic.netdev})"
    if rnic.rdma_device is None and rnic.fallback is None:
        return Check("rdma", "n/a", f"{where}: names no rdma_device and no fallback")
    plan = plan_device(rnic, present)
    if unavailable:
        wanted = rnic.rdma_device or f"{plan.device} (fallback: siw)"
        return Check("rdma", "fail", f"{where}: no {wanted}: {unavailable}")
    if plan.source == "missing":
        return Check("rdma", "fail", missing_device(rnic, sorted(present), ""))
    if plan.source == "create":
        absent = f"{rnic.rdma_device} absent; " if rnic.rdma_device else ""
        return Check(
            "rdma", "n/a", f"{where}: {absent}pair setup creates {plan.device} (fallback: siw)"
        )
    return Check("rdma", "ok", f"{where}: {plan.device} present ({plan.source})")


def _journal(store: Store, name: str) -> Check:
    # A store that fails raises: that is not the host's failure.
    entries = store.journal_entries(name)
    holders = [le for le in store.leases() if name in le.hosts]
    if not entries:
        return Check("journal", "ok", "empty")
    if holders:
        return Check(
            "journal",
            "n/a",
            f"{len(entries)} entries, held by {holders[0]} (its own changes)",
        )
    return Check(
        "journal",
        "fail",
        f"{len(entries)} entries left by a dead run (newest: "
        f"{entries[-1].entry.get('what', '?')}); run `hil host restore {name}`",
    )


def health_round(
    inventory: Inventory, store: Store, names: list[str], rdma: bool = True
) -> list[HealthCheck]:
    """Check ``names`` in parallel (each with its own connections) and record each result."""

    def one(name: str) -> HealthCheck:
        with Hosts(inventory, store) as hosts:
            result = check_host(hosts, store, name, rdma)
        record_check(store, result)
        return result

    with ThreadPoolExecutor(max_workers=max(1, min(ROUND_WORKERS, len(names)))) as pool:
        return list(pool.map(one, names))


def record_check(store: Store, result: HealthCheck) -> HostHealth:
    """A pass makes the host healthy (unless quarantined by hand); a failure counts."""
    failure = result.failure
    if failure is None:
        return store.record_health_check_passed(result.host, result.summary())
    return store.record_host_failure(result.host, FAILURE_OF[failure.name], failure.seen)


# -- what runs see (PairRun's hooks) -------------------------------------------


def failure_kind(error: BaseException) -> FailureKind | None:
    """The infrastructure failure ``error`` stands for, if it is one of a host.

    A call the agent answered with an error (``AgentCallError``: EINVAL from
    netlink) or a command that exited non-zero (``CommandFailed``) is the
    caller's business, not the host's.
    """
    if isinstance(error, AgentCallError | CommandFailed):
        return None
    if isinstance(error, AgentError):
        return "agent_handshake"
    if isinstance(error, SSHError):
        return "unreachable"
    return None


def note_failure(store: Store, host: str, kind: FailureKind, detail: str) -> None:
    """Record a host's failure; a store that fails too is logged, so the host's error
    (which the caller raises next) is the one reported."""
    try:
        health = store.record_host_failure(host, kind, detail)
    except HilError as e:
        log.warning("%s: could not record %s in the store: %s", host, kind, e)
        return
    log.warning("host health: %s", health)


def note_error(store: Store, error: BaseException) -> None:
    """Record ``error`` when it is a host's infrastructure failure (unreachable, agent)."""
    kind = failure_kind(error)
    if kind is not None and isinstance(error, RemoteError):
        note_failure(store, error.host, kind, str(error))


@contextmanager
def failures_noted(store: Store) -> Iterator[None]:
    """Record (:func:`note_error`) a host failure raised inside, and let it go on."""
    try:
        yield
    except HilError as e:
        note_error(store, e)
        raise


def note_undo_failures(store: Store, report: UndoReport) -> None:
    """Record each host whose restore (journal undo) failed, once per host."""
    seen: dict[str, str] = {}
    for f in report.failed:
        seen.setdefault(f.host, str(f))
    for host, detail in seen.items():
        note_failure(store, host, "restore_failed", detail)
