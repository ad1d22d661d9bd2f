"""``hil host health|quarantine|release-quarantine|quarantine-after``: host health in the store.

A host is healthy, suspect (an infrastructure failure: unreachable, agent
handshake failed, restore failed, kernel crash) or quarantined (after
``quarantine-after`` consecutive failures, default 3, or by hand).
Reservations never hand out a pair with a quarantined host.  A passing
``hil lab-check`` makes a host healthy again; a quarantine set by hand stays
until ``hil host release-quarantine``.  See docs/reliability.md.
"""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from collections.abc import Sequence

from hil.cli.options import Subparsers, json_option
from hil.errors import EXIT_OK, InputError
from hil.inventory import load_from_args
from hil.inventory.model import Inventory
from hil.reservation import HostHealth, open_store

HISTORY = 20  # entries shown by ``hil host health HOST``
WRAP = 70  # the last column wraps here, so the table fits a terminal


def register(cmds: Subparsers) -> None:
    """Add ``hil host health``, ``quarantine``, ``release-quarantine`` and ``quarantine-after``."""
    p = cmds.add_parser(
        "health",
        help="each host's health: healthy, suspect or quarantined (why, since when)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("host", metavar="HOST", nargs="?", help="one host, with its history")
    json_option(p, help='print {"hosts": [...]}, with HOST {"host", "history": [...]}')
    p.set_defaults(func=_health)

    p = cmds.add_parser(
        "quarantine",
        help="take a host out of service until released (no pair with it is handed out)",
    )
    p.add_argument("host", metavar="HOST")
    p.add_argument("--reason", required=True, metavar="TEXT", help="why it is out (required)")
    p.set_defaults(func=_quarantine)

    p = cmds.add_parser(
        "release-quarantine", help="put a quarantined host back in service (healthy)"
    )
    p.add_argument("host", metavar="HOST")
    p.set_defaults(func=_release)

    p = cmds.add_parser(
        "quarantine-after",
        help="show or set how many consecutive failures quarantine a host (a store setting)",
    )
    p.add_argument("count", metavar="N", type=int, nargs="?", help="set it to N (at least 1)")
    p.set_defaults(func=_quarantine_after)


def columns(rows: Sequence[Sequence[str]], wrap: int = WRAP) -> str:
    """Left-aligned columns, the last one wrapped at ``wrap`` characters."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    lines = []
    for row in rows:
        last = textwrap.wrap(row[-1], wrap, break_on_hyphens=False) or [""]
        head = "  ".join(c.ljust(w) for c, w in zip(row[:-1], widths, strict=True))
        lines.append(f"{head}  {last[0]}".rstrip())
        lines += [f"{' ' * len(head)}  {more}" for more in last[1:]]
    return "\n".join(lines)


def health_table(healths: Sequence[HostHealth]) -> str:
    """HOST, STATE, SINCE, FAILURES (consecutive) and REASON of each host."""
    rows = [("HOST", "STATE", "SINCE", "FAILURES", "REASON")]
    for h in healths:
        since = f"{h.since:%Y-%m-%d %H:%M:%S} UTC" if h.since else "-"
        state = f"{h.state} (by hand)" if h.manual else h.state
        rows.append((h.host, state, since, str(h.failures), h.reason or "-"))
    return columns(rows)


def known_host(inv: Inventory, name: str) -> str:
    """``name`` when the inventory has it; ``InputError`` naming the hosts it has."""
    if name not in inv.hosts:
        raise InputError(
            f"{inv.path}: no host {name!r} (hosts: {', '.join(sorted(inv.hosts)) or 'none'})"
        )
    return name


def _health(args: argparse.Namespace) -> int:
    inv = load_from_args(args.inventory)
    names = [known_host(inv, args.host)] if args.host else sorted(inv.hosts)
    with open_store(args.store) as store:
        healths = store.host_health(names)
        history = store.host_history(args.host, HISTORY) if args.host else []
    if args.json:
        doc = (
            {**healths[0].to_json(), "history": [r.to_json() for r in history]}
            if args.host
            else {"hosts": [h.to_json() for h in healths]}
        )
        print(json.dumps(doc))
        return EXIT_OK
    print(health_table(healths))
    if args.host:
        print(f"\nhistory (last {HISTORY}):" if history else "\nno history")
        for r in history:
            print(f"  {r}")
    return EXIT_OK


def _quarantine(args: argparse.Namespace) -> int:
    name = known_host(load_from_args(args.inventory), args.host)
    with open_store(args.store) as store:
        print(store.quarantine_host(name, args.reason))
        for lease in store.leases():
            if name in lease.hosts:
                # A quarantine refuses new reservations; it does not stop a run.
                print(
                    f"hil: note: {name} stays with its holder until released: {lease}",
                    file=sys.stderr,
                )
    return EXIT_OK


def _release(args: argparse.Namespace) -> int:
    name = known_host(load_from_args(args.inventory), args.host)
    with open_store(args.store) as store:
        print(store.release_host(name))
    return EXIT_OK


def _quarantine_after(args: argparse.Namespace) -> int:
    with open_store(args.store) as store:
        if args.count is not None:
            store.set_quarantine_after(args.count)
        count = store.quarantine_after()
    print(f"a host is quarantined after {count} consecutive infrastructure failures")
    return EXIT_OK
