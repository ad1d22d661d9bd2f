"""``hil host power HOST cycle|on|off`` and ``hil host recover HOST``: a host's power.

Both act under a lease of a pair holding HOST, taken first (or the live
lease ``--lease`` names), and the lease's fencing token is checked right
before the power is switched, so nobody else's run loses a host under it.
A host on no link (a controller) is held by no pair: it is switched unfenced.

A quarantined host cannot be reserved, yet it is the one to recover: for it
``hil host recover`` joins the wait queue for HOST's pairs first (no other
runner can take them then), ends the quarantine, takes a pair with its place
in the queue, and puts the quarantine back when the recovery fails, or when
it was set by hand (only ``hil host release-quarantine`` ends that one).

``recover``: power-cycle (when the inventory's ``power:`` allows it), wait
for SSH, undo the host's restore journal, run the health check and record it
(docs/reliability.md, Recovery).  Exits 0 when the host is back and healthy,
5 when a step failed.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from hil.cli.options import Subparsers, lease_option, wait_option
from hil.errors import EXIT_NOT_READY, EXIT_OK, BusyError, InputError
from hil.host.healthcheck import HealthCheck
from hil.host.hosts import Hosts
from hil.host.power import POWER_TIMEOUT, power, power_of
from hil.host.recovery import RECOVERY_TIMEOUT, RecoveryFailed, recover
from hil.inventory import load_from_args
from hil.inventory.model import POWER_ACTIONS, Inventory
from hil.reservation import (
    Claim,
    Heartbeat,
    Holder,
    HostHealth,
    Lease,
    Store,
    describe,
    open_store,
    reserve,
)
from hil.timeouts import seconds

TICKET_TTL = 30.0  # our place in the queue while a quarantine is ended and the pair taken


def register(cmds: Subparsers) -> None:
    """Add ``hil host power`` and ``hil host recover``."""
    p = cmds.add_parser(
        "power",
        help="power a host off, on, or cycle it (its inventory power: entry), fenced",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("host", metavar="HOST")
    p.add_argument("action", choices=POWER_ACTIONS, metavar="|".join(POWER_ACTIONS))
    _common(p, POWER_TIMEOUT, "the power action")
    p.set_defaults(func=_power)

    p = cmds.add_parser(
        "recover",
        help="bring a crashed or hung host back: cycle, SSH, journal, health check",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("host", metavar="HOST")
    _common(p, RECOVERY_TIMEOUT, "the whole recovery")
    p.add_argument(
        "--no-rdma",
        action="store_true",
        help="a host without RDMA (e.g. a network namespace): skip the RDMA device check",
    )
    p.set_defaults(func=_recover)


def _common(p: argparse.ArgumentParser, timeout: float, what: str) -> None:
    lease_option(p, help="act under this live lease of a pair holding HOST")
    wait_option(p)
    p.add_argument(
        "--timeout",
        type=seconds,
        default=timeout,
        metavar="S",
        help=f"bound of {what} (default {timeout:g})",
    )


def say(text: str) -> None:
    """Progress, to stderr."""
    print(f"hil: {text}", file=sys.stderr, flush=True)


def _power(args: argparse.Namespace) -> int:
    inv = load_from_args(args.inventory)
    power_of(inv.host(args.host))  # before taking a lease for nothing
    note = f"hil host power {args.host} {args.action}"
    ttl = max(60.0, args.timeout)
    with (
        open_store(args.store) as store,
        holding(store, inv, args.host, args.lease, args.wait, ttl, note, False) as held,
        Hosts(inv, store) as hosts,
    ):
        power(hosts, args.host, args.action, fence=held.fence, timeout=args.timeout)
    print(f"{args.host}: power {args.action} done")
    return EXIT_OK


def _recover(args: argparse.Namespace) -> int:
    inv = load_from_args(args.inventory)
    inv.host(args.host)
    with open_store(args.store) as store:
        try:
            result = recover_host(
                store, inv, args.host, args.lease, args.wait, args.timeout, not args.no_rdma
            )
        except RecoveryFailed as e:
            print(f"hil: error: {e}", file=sys.stderr)
            return EXIT_NOT_READY
    print(f"{args.host}: recovered: {result.summary()}")
    return EXIT_OK


def recover_host(
    store: Store,
    inv: Inventory,
    host: str,
    lease_id: str | None,
    wait: float,
    timeout: float,
    rdma: bool = True,
) -> HealthCheck:
    """Recover ``host`` under a lease of a pair holding it (see the module doc)."""
    ttl = max(60.0, timeout / 3)  # renewed by a heartbeat meanwhile
    note = f"hil host recover {host}"
    with holding(store, inv, host, lease_id, wait, ttl, note, True) as held:
        with Hosts(inv, store) as hosts:
            try:
                result = recover(
                    hosts, store, host, fence=held.fence, say=say, timeout=timeout, rdma=rdma
                )
            except BaseException as e:
                step = f"at step {e.step}" if isinstance(e, RecoveryFailed) else f"({e})"
                held.requarantine(f"hil host recover failed {step}")
                raise
        if held.ended is not None and held.ended.manual:
            held.requarantine(held.ended.reason)
    return result


@dataclass
class Held:
    """The lease a host's power action is fenced by (None: a host on no link), and the
    quarantine ended to take it, if one was."""

    store: Store
    host: str
    lease: Lease | None
    ended: HostHealth | None = None

    def fence(self) -> None:
        """Raise LeaseLost unless our lease (its id and token) still holds the host."""
        if self.lease is not None:
            self.store.fence(self.lease.id, self.lease.token)

    def requarantine(self, reason: str) -> None:
        """Put back the quarantine ended to take the pair."""
        if self.ended is not None:
            health = self.store.quarantine_host(self.host, reason)
            say(f"{health}; `hil host release-quarantine {self.host}` ends it")


@contextmanager
def holding(
    store: Store,
    inv: Inventory,
    host: str,
    lease_id: str | None,
    wait: float,
    ttl: float,
    note: str,
    quarantined_ok: bool,
) -> Iterator[Held]:
    """The lease ``host``'s power action is fenced by: ``lease_id``'s, or one of a pair
    holding it, taken here, kept alive meanwhile and released at the end."""
    if lease_id:
        lease = store.get(lease_id)
        if host not in lease.hosts:
            raise InputError(f"lease {lease.id} holds {', '.join(lease.hosts)}, not {host}")
        store.fence(lease.id, lease.token)
        yield Held(store, host, lease)
        return
    claims = host_claims(inv, host)
    if not claims:
        say(f"{host} is on no link, so no pair holds it: acting without a lease")
        yield Held(store, host, None)
        return
    holder = Holder.current(note=note)
    (health,) = store.host_health([host])
    if health.state == "quarantined" and quarantined_ok:
        held = Held(store, host, _take_quarantined(store, claims, holder, ttl, health), health)
    else:
        held = Held(store, host, reserve(store, claims, holder, ttl, wait, progress=say))
    assert held.lease is not None
    say(f"holding {held.lease.pair} under lease {held.lease.id}")
    try:
        with Heartbeat(store, held.lease):
            yield held
    finally:
        store.release(held.lease.id)


def host_claims(inv: Inventory, host: str) -> list[Claim]:
    """The pairs that hold ``host``, as claims."""
    return [
        Claim(p.name, (p.host_a.name, p.host_b.name))
        for p in inv.pairs()
        if host in (p.host_a.name, p.host_b.name)
    ]


def _take_quarantined(
    store: Store, claims: list[Claim], holder: Holder, ttl: float, health: HostHealth
) -> Lease:
    """A pair holding the quarantined host: queue first (no one else can take its pairs
    then), end the quarantine, take the pair with our place in the queue."""
    host = health.host
    say(f"{health}: ending the quarantine to take a pair holding it for the recovery")
    ticket = store.enqueue(claims, holder, TICKET_TTL)
    try:
        store.release_host(host)
        lease = store.try_acquire(claims, holder, ttl, ticket=ticket, ticket_ttl=TICKET_TTL)
    finally:
        store.dequeue(ticket)
    if lease is None:
        store.quarantine_host(host, health.reason)
        raise BusyError(
            f"{host}: no pair holding it is free ({describe(store, claims)}); quarantined again"
        )
    return lease
