"""Bring a crashed or hung host back into service: cycle, reach, restore, check.

``recover(hosts, store, "t6-a", fence=..., say=print, timeout=600)``:

1. **power**: cycle the host when its inventory ``power:`` allows it
   (``recover: true``, the default), ``fence`` called immediately before;
   a host without power is not cycled: recovery waits for it to come back
   by itself (a reboot on panic, a hand on the switch);
2. **ssh**: wait until SSH runs ``true`` on it, within the bound;
3. **agent**: start the agent and make its first netlink call (a freshly
   booted host is slow to import and answer: a replayed undo's own bound,
   such as a 10 s wait for carrier, must not pay for that);
4. **journal**: undo what the host's restore journal holds (a link pulled
   through QEMU or a switch outlives a reboot; the rest is undone or found
   gone already);
5. **health**: the health check (:mod:`hil.host.healthcheck`), recorded in
   the store: a pass makes the host healthy again (a quarantine by failures
   ends; one set by hand stays), a failure counts.

Each failing step is recorded in the store as the host's failure and raises
``RecoveryFailed`` naming the host, the step and what to do.  The whole is
bounded by ``timeout`` (one SSH connect attempt may overrun it by the host's
``connect_timeout``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Literal

from hil import tools
from hil.errors import HilError, LeaseLost, RemoteError
from hil.host.healthcheck import HealthCheck, check_host, note_failure, record_check
from hil.host.journal import restore_host
from hil.host.power import may_cycle, power

if TYPE_CHECKING:
    from hil.host.hosts import Hosts
    from hil.reservation.health import FailureKind
    from hil.reservation.store import Store

RecoveryStep = Literal["power", "ssh", "agent", "journal", "health"]
RECOVERY_TIMEOUT = 600.0  # a TCG guest on a busy machine boots in 1-2 min; real hosts in 5
POLL = 2.0  # between SSH attempts
SSH_ATTEMPT = 15.0  # one attempt's command bound
WARMUP = 180.0  # the agent's start and first netlink call on a freshly booted host (TCG: slow)

# What to do when a step fails.
_ADVICE: dict[RecoveryStep, str] = {
    "power": "check the power controller and the host's `power:` entry, then "
    "`hil host recover HOST` again",
    "ssh": "look at the host's console (the lab guest's log); power it by hand "
    "(`hil host power HOST cycle`) and `hil host recover HOST` again",
    "agent": "see the agent's error; `hil host doctor HOST` checks what it needs",
    "journal": "fix what the undo needs, then `hil host restore HOST` and `hil lab-check`",
    "health": "see the failing check; fix the host, then `hil lab-check`",
}
# What the store records when a step fails (the health step records its own check).
_FAILURE: dict[RecoveryStep, FailureKind] = {
    "power": "unreachable",
    "ssh": "unreachable",
    "agent": "agent_handshake",
    "journal": "restore_failed",
}


class RecoveryFailed(RemoteError):
    """A recovery step failed; ``step`` is power, ssh, agent, journal or health."""

    def __init__(self, host: str, step: RecoveryStep, seen: str) -> None:
        self.step = step
        advice = _ADVICE[step].replace("HOST", host)
        super().__init__(host, f"recovery failed at step {step}: {seen}; {advice}")


def recover(
    hosts: Hosts,
    store: Store,
    host: str,
    *,
    fence: Callable[[], None] | None,
    say: Callable[[str], None],
    timeout: float = RECOVERY_TIMEOUT,
    rdma: bool = True,
) -> HealthCheck:
    """Recover ``host`` (see the module doc); its passing health check.

    ``rdma`` False skips the health check's RDMA device check (hosts without
    RDMA, like ``--no-rdma``).

    ``fence`` raises (LeaseLost) when the caller no longer holds the host's
    lease: that error goes through unchanged and nothing was switched.
    """
    deadline = time.monotonic() + timeout
    started = time.monotonic()
    hosts.forget(host)  # whatever we had with it is gone or stale
    if may_cycle(hosts.host(host)):
        _cycle(hosts, store, host, fence, say, deadline)
    else:
        say(f"{host}: no power entry that recovery may use: not cycled; waiting for SSH")
    _wait_ssh(hosts, store, host, say, deadline, started)
    _warm_agent(hosts, store, host, deadline)
    _replay(hosts, store, host, say)
    result = check_host(hosts, store, host, rdma)
    record_check(store, result)
    failure = result.failure
    if failure is not None:
        raise RecoveryFailed(host, "health", f"check {failure.name} failed: {failure.seen}")
    say(f"{host}: recovered in {time.monotonic() - started:.0f} s ({result.summary()})")
    return result


def _fail(store: Store, host: str, step: RecoveryStep, seen: str) -> RecoveryFailed:
    """Record ``step``'s failure in the store; the error to raise."""
    note_failure(store, host, _FAILURE[step], f"recovery, {step}: {seen}")
    return RecoveryFailed(host, step, seen)


def _cycle(
    hosts: Hosts,
    store: Store,
    host: str,
    fence: Callable[[], None] | None,
    say: Callable[[str], None],
    deadline: float,
) -> None:
    say(f"{host}: power cycle")
    try:
        power(hosts, host, "cycle", fence=fence, timeout=max(1.0, deadline - time.monotonic()))
    except LeaseLost:
        raise  # not the host's failure: we may no longer touch it
    except HilError as e:
        raise _fail(store, host, "power", str(e)) from e


def _wait_ssh(
    hosts: Hosts,
    store: Store,
    host: str,
    say: Callable[[str], None],
    deadline: float,
    started: float,
) -> None:
    last = "no attempt"
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise _fail(store, host, "ssh", f"no SSH within the bound; last: {last}")
        try:
            session = hosts.session(host)
            session.run(tools.argv("true"), timeout=min(SSH_ATTEMPT, max(1.0, left)))
        except HilError as e:
            last = str(e)
            hosts.forget(host)
            time.sleep(min(POLL, max(0.0, deadline - time.monotonic())))
            continue
        say(f"{host}: SSH answers (+{time.monotonic() - started:.0f} s)")
        return


def _warm_agent(hosts: Hosts, store: Store, host: str, deadline: float) -> None:
    try:
        hosts.call(host, "links", timeout=min(WARMUP, max(1.0, deadline - time.monotonic())))
    except HilError as e:
        raise _fail(store, host, "agent", str(e)) from e


def _replay(hosts: Hosts, store: Store, host: str, say: Callable[[str], None]) -> None:
    try:
        report = restore_host(hosts, host, store)
    except HilError as e:
        raise _fail(store, host, "journal", str(e)) from e
    for line in report.undone:
        say(f"{host}: journal: undone {line}")
    if report.failed:
        raise _fail(store, host, "journal", "; ".join(str(f) for f in report.failed))
