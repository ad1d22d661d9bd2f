"""``hil lab-check [--pair P]``: a health round over the inventory's hosts.

For a cron job or the start of a nightly.  Checks each host (or the pair's
two): SSH, the agent's handshake, each port's RDMA device, an empty restore
journal; records the outcome in the store (a pass makes a host healthy again,
a failure counts towards quarantine) and prints a table, then each host's
state.  Changes nothing on the hosts, unless ``--recover``: then each host
that failed and whose inventory ``power:`` lets recovery cycle it is
recovered (``hil host recover``: power cycle, SSH, journal, health check,
fenced by a lease of a pair holding it) and its new result shown.  Exits 0
when every host passed (or was recovered) and is healthy, 5 when a host
failed or is quarantined, 1 for an unknown pair.
"""

from __future__ import annotations

import argparse
import json

from hil.cli.host_health import columns, health_table
from hil.cli.host_power import recover_host, say
from hil.cli.options import Subparsers, json_option
from hil.errors import EXIT_NOT_READY, EXIT_OK, HilError, InputError
from hil.host.healthcheck import HealthCheck, health_round
from hil.host.power import may_cycle
from hil.host.recovery import RECOVERY_TIMEOUT
from hil.inventory import load_from_args
from hil.inventory.model import Inventory
from hil.reservation import HostHealth, Store, open_store


def register(subparsers: Subparsers) -> None:
    """Add ``hil lab-check``."""
    p = subparsers.add_parser(
        "lab-check",
        help="health-check the lab's hosts and record it (for cron or a nightly's start)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--pair", metavar="P", help="only this pair's two hosts")
    p.add_argument(
        "--no-rdma",
        action="store_true",
        help="hosts without RDMA (e.g. network namespaces): skip the RDMA device check",
    )
    p.add_argument(
        "--recover",
        action="store_true",
        help="recover each failing host that has a power: entry (cycle, SSH, journal, check)",
    )
    json_option(p, help='print {"ok", "hosts": [{"host", "ok", "checks", "health"}]}')
    p.set_defaults(func=_lab_check)


def _names(inv: Inventory, pair: str | None) -> list[str]:
    if pair is None:
        return sorted(inv.hosts)
    try:
        p = inv.pair(pair)
    except KeyError as e:
        raise InputError(str(e.args[0])) from None
    return [p.host_a.name, p.host_b.name]


def _recovered(store: Store, inv: Inventory, result: HealthCheck, rdma: bool) -> HealthCheck:
    """``result``, or the check that ends a recovery of its host when it failed and may be
    power-cycled (a failed recovery keeps ``result``; the store has it recorded)."""
    if result.ok or not may_cycle(inv.host(result.host)):
        return result
    failure = result.failure
    assert failure is not None
    say(f"{result.host} failed the check ({failure.name}: {failure.seen}): recovering it")
    try:
        return recover_host(store, inv, result.host, None, 0.0, RECOVERY_TIMEOUT, rdma)
    except HilError as e:
        say(f"{result.host}: not recovered: {e}")
        return result


def check_table(results: list[HealthCheck]) -> str:
    """HOST, CHECK, STATUS and SEEN of every check."""
    rows = [("HOST", "CHECK", "STATUS", "SEEN")]
    for r in results:
        rows += [
            (r.host, c.name, c.status.upper() if c.status == "fail" else c.status, c.seen)
            for c in r.checks
        ]
    return columns(rows)


def _lab_check(args: argparse.Namespace) -> int:
    inv = load_from_args(args.inventory)
    names = _names(inv, args.pair)
    with open_store(args.store) as store:
        results = health_round(inv, store, names, rdma=not args.no_rdma)
        if args.recover:
            results = [_recovered(store, inv, r, not args.no_rdma) for r in results]
        healths = store.host_health(names)
    ok = all(r.ok for r in results) and all(h.state == "healthy" for h in healths)
    if args.json:
        print(
            json.dumps(
                {
                    "ok": ok,
                    "hosts": [
                        {**r.to_json(), "health": h.to_json()}
                        for r, h in zip(results, healths, strict=True)
                    ],
                }
            )
        )
    else:
        print(check_table(results))
        print()
        print(health_table(healths))
        print()
        print(_verdict(results, healths))
    return EXIT_OK if ok else EXIT_NOT_READY


def _verdict(results: list[HealthCheck], healths: list[HostHealth]) -> str:
    failed = [r.host for r in results if not r.ok]
    out = [h.host for h in healths if h.state == "quarantined"]
    if not failed and not out:
        return f"lab-check: {len(results)} hosts healthy"
    parts = []
    if failed:
        parts.append(f"failed the check: {', '.join(failed)}")
    if out:
        parts.append(f"quarantined: {', '.join(out)}")
    return f"lab-check: NOT HEALTHY: {'; '.join(parts)}"
