"""``hil link pull|restore|state``: pull an inventory link by hand, and put it back.

A pull is journaled in the restore journal of the link's end host, so it
outlives the command: ``hil link restore LINK`` undoes it, and so does the
next reservation of the link's pair.  While a live lease holds the pair,
pass ``--lease LEASE`` to act under it.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from contextlib import contextmanager

from hil.cli.host_cmd import acting_lease
from hil.cli.options import command_group, json_option, lease_option
from hil.errors import EXIT_OK
from hil.host.hosts import Hosts
from hil.host.journal import Journal
from hil.host.linkctl import LinkControl, LinkState, find_link
from hil.inventory import PULL_MODES, Link, load_from_args
from hil.reservation import open_store

LINK_LEASE_HELP = "the live lease that holds the link's pair"


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add ``hil link`` and its subcommands."""
    cmds = command_group(subparsers, "link", "pull and restore lab links", __doc__)
    modes = ", ".join(PULL_MODES)

    p = cmds.add_parser("pull", help="pull a link (take it down) in one of its modes")
    p.add_argument("link", metavar="LINK")
    p.add_argument(
        "--mode", metavar="MODE", help=f"one of the link's pull modes ({modes}); default: its first"
    )
    lease_option(p, help=LINK_LEASE_HELP)
    p.set_defaults(func=_pull)

    p = cmds.add_parser("restore", help="undo the pulls of a link")
    p.add_argument("link", metavar="LINK")
    p.add_argument("--mode", metavar="MODE", help="undo only the pull of this mode")
    lease_option(p, help=LINK_LEASE_HELP)
    p.set_defaults(func=_restore)

    p = cmds.add_parser("state", help="both ends of a link and its journaled pulls")
    p.add_argument("link", metavar="LINK")
    json_option(p)
    p.set_defaults(func=_state)


@contextmanager
def _acting_on_link(args: argparse.Namespace) -> Iterator[tuple[LinkControl, Link]]:
    """Link control journaling under the lease that may act on ``args.link``, and the link."""
    inv = load_from_args(args.inventory)
    with open_store(args.store) as store, Hosts(inv, store) as hosts:
        link = find_link(inv, args.link)
        lease = acting_lease(store, [link.a.host, link.b.host], args.lease)
        # Under a given lease each record is fenced, like a run's own journal: a lease
        # taken over since the check above changes nothing.
        token = store.get(lease).token if args.lease else None
        yield LinkControl(hosts, Journal(hosts, store, lease, token=token)), link


def _pull(args: argparse.Namespace) -> int:
    with _acting_on_link(args) as (control, link):
        pull = control.pull(link, args.mode)
    print(f"link {link.name} pulled ({pull.mode}); undo with `hil link restore {link.name}`")
    return EXIT_OK


def _restore(args: argparse.Namespace) -> int:
    with _acting_on_link(args) as (control, link):
        report = control.restore(link, args.mode)
    if not report.undone:
        print(f"link {link.name} is not pulled: nothing to restore")
    for line in report.undone:
        print(f"undone: {line}")
    return EXIT_OK


def _state(args: argparse.Namespace) -> int:
    inv = load_from_args(args.inventory)
    with open_store(args.store) as store, Hosts(inv, store) as hosts:
        state = LinkControl(hosts, Journal(hosts, store, "state")).state(args.link)
    if args.json:
        print(json.dumps(state.to_json()))
        return EXIT_OK
    _print_state(state)
    return EXIT_OK


def _print_state(state: LinkState) -> None:
    pulled = f"pulled ({', '.join(state.pulled)})" if state.pulled else "not pulled"
    print(f"link {state.link}: {pulled}")
    for end in (state.a, state.b):
        flags = [
            end.operstate,
            "up" if end.up else "down",
            "carrier" if end.carrier else "no-carrier",
        ]
        if end.blackholed:
            flags.append("blackholed")
        if end.port_state:
            flags.append(f"rdma-port-{end.port_state}")
        print(f"  {end.host}:{end.port} {end.netdev}: {' '.join(flags)}")
