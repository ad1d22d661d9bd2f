"""``hil reserve|renew|release|status``: pair leases for CI scripts and people.

A lease taken with ``hil reserve`` outlives the command: keep it alive with
``hil renew LEASE`` (before its TTL runs out) and give it back with
``hil release LEASE``; or use ``hil reserve --hold``, which renews in the
foreground until SIGTERM or SIGINT and then releases.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from typing import Any

from hil.cli.options import json_option, pair_choice, wait_option
from hil.errors import EXIT_OK
from hil.inventory import load_from_args
from hil.reservation import Heartbeat, Holder, Lease, Store, open_store, reserve
from hil.run import claims_for
from hil.timeouts import seconds

RESERVE_HELP = """\
Reserve a pair (both its hosts) of the inventory: the one --pair names, the
first free one meeting every --require, or else the first free one at all.

The lease outlives this command: keep it alive with 'hil renew LEASE' before
its TTL runs out and give it back with 'hil release LEASE'; or use --hold,
which renews in the foreground until SIGTERM or SIGINT and then releases.
Exit 2 when no pair is free (or --wait ran out), naming who holds them.
"""


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add ``reserve``, ``renew``, ``release`` and ``status``."""
    p = subparsers.add_parser(
        "reserve",
        help="reserve a pair of lab hosts",
        description=RESERVE_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    pair_choice(
        p, require_help="any pair meeting this requirement (repeatable), e.g. driver=iw_cxgb4"
    )
    p.add_argument(
        "--ttl",
        type=_ttl,
        default=300.0,
        metavar="S",
        help="lease lifetime without renewal, in seconds (default 300)",
    )
    wait_option(
        p,
        type=seconds,
        help="queue up to S seconds for a busy pair, first come first served "
        "(default 0: fail at once, exit 2)",
    )
    p.add_argument("--holder", metavar="TEXT", help="a note on who or what holds the lease")
    json_option(p, help="print one JSON object: lease, pair, hosts, holder, acquired, expires, ttl")
    p.add_argument(
        "--hold",
        action="store_true",
        help="stay in the foreground renewing until SIGTERM/SIGINT, then release; "
        "exit 3 if the lease is lost",
    )
    p.set_defaults(func=_reserve)

    p = subparsers.add_parser(
        "renew",
        help="extend a lease",
        description="Push LEASE's expiry to now + TTL. Exit 3 if it was "
        "lost (taken over after it expired).",
    )
    p.add_argument("lease", metavar="LEASE")
    p.add_argument("--ttl", type=_ttl, metavar="S", help="new TTL (default: the lease's)")
    json_option(p, help="print the lease as one JSON object")
    p.set_defaults(func=_renew)

    p = subparsers.add_parser(
        "release",
        help="give a lease back",
        description="Release LEASE; releasing it again is fine.",
    )
    p.add_argument("lease", metavar="LEASE")
    p.set_defaults(func=_release)

    p = subparsers.add_parser(
        "status",
        help="who holds which pair, who waits, which hosts are not healthy",
        description="List live leases (holder, since, until), waiters, and the hosts that "
        "are suspect or quarantined (see `hil host health`).",
    )
    json_option(
        p,
        help='one JSON object: {"leases": [...], "waiting": [...], "hosts_not_healthy": [...]}',
    )
    p.set_defaults(func=_status)


def _ttl(text: str) -> float:
    value = seconds(text)
    if value == 0:
        raise argparse.ArgumentTypeError("a TTL must be more than 0 seconds")
    return value


def _print_lease(lease: Lease, as_json: bool) -> None:
    print(json.dumps(lease.to_json()) if as_json else str(lease), flush=True)


def _reserve(args: argparse.Namespace) -> int:
    claims = claims_for(load_from_args(args.inventory), args.pair, args.require)
    with open_store(args.store) as store:
        lease = reserve(
            store,
            claims,
            Holder.current(args.holder),
            ttl=args.ttl,
            wait=args.wait,
            progress=lambda text: print(f"hil: {text}", file=sys.stderr, flush=True),
        )
        _print_lease(lease, args.json)
        if args.hold:
            _hold(store, lease)
    return EXIT_OK


def _hold(store: Store, lease: Lease) -> None:
    """Renew until SIGTERM/SIGINT, then release; raise LeaseLost if it is lost."""
    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: done.set())
    with Heartbeat(store, lease, on_lost=lambda _: done.set()) as beat:
        # Short waits: the signal handler runs between them.
        while not done.wait(0.2):
            pass
    beat.check()
    store.release(lease.id)
    print(f"hil: released lease {lease.id}", file=sys.stderr)


def _renew(args: argparse.Namespace) -> int:
    with open_store(args.store) as store:
        _print_lease(store.renew(args.lease, args.ttl), args.json)
    return EXIT_OK


def _release(args: argparse.Namespace) -> int:
    with open_store(args.store) as store:
        store.release(args.lease)
    return EXIT_OK


def _status(args: argparse.Namespace) -> int:
    with open_store(args.store) as store:
        leases, tickets = store.leases(), store.tickets()
        out = [h for h in store.host_health() if h.state != "healthy"]
    if args.json:
        doc: dict[str, Any] = {
            "leases": [le.to_json() for le in leases],
            "waiting": [t.to_json() for t in tickets],
            "hosts_not_healthy": [h.to_json() for h in out],
        }
        print(json.dumps(doc))
        return EXIT_OK
    if not leases:
        print("no pair is held")
    for le in leases:
        print(
            f"{le.pair:<16} {le.hosts[0]}+{le.hosts[1]}  lease {le.id}  held by {le.holder}  "
            f"since {le.acquired:%Y-%m-%d %H:%M:%S} until {le.expires:%H:%M:%S} UTC"
        )
    for t in tickets:
        print(
            f"waiting: {t.holder} for {', '.join(c.pair for c in t.claims)} "
            f"since {t.created:%Y-%m-%d %H:%M:%S} UTC"
        )
    # A pair that never comes up in the lines above may be held back by a host.
    for health in out:
        print(f"not healthy: {health}")
    return EXIT_OK
