"""``hil host info|exec|setup|restore|doctor|health|quarantine|power|recover``: a host, a pair.

``hil host setup PAIR`` reserves the pair (unless ``--lease`` names one
already held), replays what dead runs left in its restore journal, sets it
up, prints the lease and keeps it, like ``hil reserve``: renew it with
``hil renew``, give it back with ``hil release``.  Its changes stay in the
journal and are undone by the next reservation of the pair or by
``hil host restore HOST``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable

from hil.cli import host_doctor, host_exec, host_health, host_info, host_power
from hil.cli.options import (
    command_group,
    json_option,
    lease_option,
    module_param_option,
    wait_option,
)
from hil.errors import EXIT_OK, BusyError, InputError
from hil.host.hosts import Hosts
from hil.host.journal import restore_host
from hil.inventory import load_from_args
from hil.inventory.model import Inventory, Pair
from hil.reservation import Holder, Store, open_store


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add ``hil host`` and its subcommands."""
    cmds = command_group(subparsers, "host", "inspect, configure and restore lab hosts", __doc__)

    host_info.register(cmds)
    host_exec.register(cmds)

    p = cmds.add_parser(
        "setup",
        help="reserve a pair and bring it to the inventory's state",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("pair", metavar="PAIR")
    lease_option(p, help="set up under this live lease of the pair instead of reserving it")
    p.add_argument(
        "--ttl", type=float, default=300.0, metavar="S", help="TTL of the lease taken (default 300)"
    )
    wait_option(p)
    p.add_argument(
        "--no-rdma", action="store_true", help="configure the network only; pick no RDMA device"
    )
    module_param_option(p)
    json_option(p, help='print {"lease": ..., "setup": ...}')
    p.set_defaults(func=_setup)

    p = cmds.add_parser(
        "restore",
        help="undo a host's restore journal, newest change first",
        description="Undo every change left in HOST's restore journal. "
        "Refused while a live lease holds HOST, unless --lease names it or "
        "--force is given.",
    )
    p.add_argument("host", metavar="HOST")
    lease_option(p, help="the live lease that holds HOST")
    p.add_argument("--force", action="store_true", help="restore even while another lease holds it")
    p.set_defaults(func=_restore)

    host_doctor.register(cmds)
    host_health.register(cmds)
    host_power.register(cmds)


# -- leases ---------------------------------------------------------------------


def acting_lease(store: Store, host_names: Iterable[str], given: str | None) -> str:
    """The lease id a manual change to ``host_names`` is journaled under.

    ``given`` must be live and hold those hosts.  Without it, hosts held by a
    live lease are refused (``BusyError``); free hosts get a ``manual:`` id.
    """
    names = set(host_names)
    live = [le for le in store.leases() if names & set(le.hosts)]
    if given:
        lease = next((le for le in live if le.id == given), None)
        if lease is None:
            held = ", ".join(sorted(names))
            raise InputError(f"lease {given} is not live or holds none of {held}")
        if not names <= set(lease.hosts):
            raise InputError(
                f"lease {given} holds {', '.join(lease.hosts)}, not all of "
                f"{', '.join(sorted(names))}"
            )
        return lease.id
    if live:
        le = live[0]
        raise BusyError(
            f"{', '.join(sorted(names & set(le.hosts)))} held by lease {le.id} "
            f"({le.holder}); pass --lease {le.id} to act under it"
        )
    holder = Holder.current()
    return f"manual:{holder.user}@{holder.hostname}"


def _pair(inv: Inventory, name: str) -> Pair:
    try:
        return inv.pair(name)
    except KeyError as e:
        raise InputError(str(e.args[0])) from None


# -- setup and restore -------------------------------------------------------------


def _setup(args: argparse.Namespace) -> int:
    from hil.run import PairRequest, PairRun

    inv = load_from_args(args.inventory)
    pair = _pair(inv, args.pair)
    with open_store(args.store) as store:
        if args.lease:
            acting_lease(store, [pair.host_a.name, pair.host_b.name], args.lease)
        request = PairRequest(
            pair=pair.name,
            lease=args.lease,
            holder="hil host setup",
            ttl=args.ttl,
            wait=args.wait,
            rdma=not args.no_rdma,
            module_params=tuple(args.module_param),
        )
        # A failed setup is undone and a lease we took given back; a good one is kept.
        progress = lambda t: print(f"hil: {t}", file=sys.stderr)  # noqa: E731
        with PairRun(inv, store, request, progress=progress) as run:
            lease, state = run.lease, run.state
            run.keep()
    if args.json:
        print(json.dumps({"lease": lease.to_json(), "setup": state.to_json()}))
        return EXIT_OK
    print(lease)
    for side in (state.a, state.b):
        created = " (created)" if side.created else ""
        print(
            f"  {side.host}:{side.port} {side.netdev} {side.address or '-'} mtu {side.mtu} "
            f"rdma {side.rdma_device or '-'}{created}"
        )
    print(f"  {state.a.host} reaches {state.b.host}: {'yes' if state.reached else 'not checked'}")
    return EXIT_OK


def _restore(args: argparse.Namespace) -> int:
    inv = load_from_args(args.inventory)
    with open_store(args.store) as store, Hosts(inv, store) as hosts:
        hosts.host(args.host)
        if not args.force:
            acting_lease(store, [args.host], args.lease)
        report = restore_host(hosts, args.host)
    for line in report.undone:
        print(f"undone: {line}")
    if not report.undone and not report.failed:
        print(f"{args.host}: the restore journal is empty; nothing to restore")
    report.check(f"restoring {args.host}")
    return EXIT_OK
