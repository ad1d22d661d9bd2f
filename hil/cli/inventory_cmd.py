"""``hil inventory check|show``: validate inventory files and show what they hold."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from hil.cli.options import json_option
from hil.errors import EXIT_INPUT, EXIT_NOT_READY, EXIT_OK, InputError
from hil.host.hosts import Hosts
from hil.host.peerroute import peer_routes
from hil.inventory import (
    CaptureSpec,
    ImpairSpec,
    Inventory,
    Pair,
    inventory_document,
    inventory_path,
    load,
    load_from_args,
    parse_requirements,
    select,
)


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add ``inventory check`` and ``inventory show``."""
    group = subparsers.add_parser(
        "inventory", help="check or show inventory files", description=__doc__
    )
    sub = group.add_subparsers(dest="inventory_command", metavar="ACTION")
    sub.required = True

    check = sub.add_parser(
        "check",
        help="validate inventory files",
        description="Validate each FILE; print 'FILE: ok (N hosts, M links)' or its "
        "located error (file:line: yaml.path: message). Exit 1 if any is bad. With --peers, "
        "also ask each link's reference-peer host over SSH for its route to the DUT's "
        "address (ip route get); exit 5 if one has none.",
    )
    check.add_argument("files", nargs="*", metavar="FILE", help="default: --inventory")
    check.add_argument(
        "--peers",
        action="store_true",
        help="check over SSH that each link's peer host (its peer:, else the pair's other "
        "host) routes to the DUT's address, per end and family",
    )
    check.set_defaults(func=_check)

    show = sub.add_parser(
        "show",
        help="show hosts, ports and pairs",
        description="Print the hosts, their RNIC ports and the pairs (with the pull "
        "modes each offers) of an inventory.",
    )
    show.add_argument("file", nargs="?", metavar="FILE", help="default: --inventory")
    json_option(show, help="one JSON object: hosts, links, pairs")
    show.add_argument(
        "--require",
        action="append",
        default=[],
        metavar="K=V",
        help="list only pairs meeting this requirement (repeatable), e.g. speed>=25000",
    )
    show.set_defaults(func=_show)


def _check(args: argparse.Namespace) -> int:
    files = args.files or [inventory_path(args.inventory)]
    status = EXIT_OK
    for file in files:
        try:
            inv = load(file)
        except InputError as e:
            print(e, file=sys.stderr)
            status = EXIT_INPUT
            continue
        if args.peers and not _peers_routed(inv):
            status = max(status, EXIT_NOT_READY)
            continue
        print(f"{file}: ok ({len(inv.hosts)} hosts, {len(inv.links)} links)")
    return status


def _peers_routed(inv: Inventory) -> bool:
    """Print each peer host's route to each DUT address (a missing one on stderr);
    True when every one is usable."""
    with Hosts(inv) as hosts:
        routes = [r for pair in inv.pairs() for r in peer_routes(hosts, pair)]
    for route in routes:
        print(f"{inv.path}: {route}", file=sys.stderr if route.problem else sys.stdout)
    return all(r.problem is None for r in routes)


def _show(args: argparse.Namespace) -> int:
    requirements = parse_requirements(args.require)
    inv = load_from_args(args.file or args.inventory)
    pairs = select(inv, requirements)
    if args.json:
        print(json.dumps(inventory_document(inv, pairs), indent=2))
        return EXIT_OK
    print(_hosts_table(inv))
    print()
    print(_ports_table(inv))
    print()
    if requirements:
        wanted = " ".join(str(r) for r in requirements)
        print(f"pairs meeting {wanted}: {len(pairs)} of {len(inv.links)}")
    print(_pairs_table(pairs))
    return EXIT_OK


def _hosts_table(inv: Inventory) -> str:
    rows: list[tuple[object, ...]] = [("HOST", "SSH", "TAGS")]
    for h in inv.hosts.values():
        target = f"{h.ssh.user}@{h.ssh.host}:{h.ssh.port}"
        if h.ssh.jump:
            target += f" via {h.ssh.jump}"
        rows.append((h.name, target, ",".join(h.tags) or "-"))
    return _table(rows)


def _ports_table(inv: Inventory) -> str:
    rows: list[tuple[object, ...]] = [
        ("HOST", "PORT", "NETDEV", "DRIVER", "RDMA_DEVICE", "ADDRESS", "MTU", "SPEED", "FIRMWARE",
         "FALLBACK"),
    ]  # fmt: skip
    for h in inv.hosts.values():
        for r in h.rnics:
            rows.append((h.name, r.name, r.netdev, r.driver, r.rdma_device, r.address, r.mtu,
                         r.speed, r.firmware, r.fallback))  # fmt: skip
    return _table(rows) if len(rows) > 1 else "no RNIC ports"


def _pairs_table(pairs: list[Pair]) -> str:
    if not pairs:
        return "no pairs"
    rows: list[tuple[object, ...]] = [
        ("PAIR", "END_A", "END_B", "TAGS", "PULLS", "CAPTURE", "IMPAIR", "PEERS")
    ]
    for p in pairs:
        modes = ",".join(pull.mode for pull in p.link.pulls)
        peers = ",".join(peer.host for peer in p.link.peers)
        rows.append(
            (p.name, p.link.a, p.link.b, ",".join(p.link.tags) or "-", modes or "-",
             _capture(p.link.capture), _impair(p.link.impair), peers or "-")
        )  # fmt: skip
    return _table(rows)


def _impair(impair: ImpairSpec) -> str:
    """``netem``, ``middlebox mbox-1``, ``command on switch-ctl`` or ``none``."""
    if impair.mode == "middlebox":
        return f"middlebox {impair.host}"
    if impair.mode == "command":
        return f"command on {impair.controller}"
    return impair.mode


def _capture(capture: CaptureSpec) -> str:
    """``ends``, ``host tap-1:enp3s0``, ``command on switch-ctl`` or ``none``."""
    if capture.mode == "host":
        return f"host {capture.host}:{capture.netdev}"
    if capture.mode == "command":
        return f"command on {capture.controller}"
    return capture.mode


def _table(rows: Sequence[Sequence[object]]) -> str:
    """Left-aligned columns; ``None`` shows as ``-``."""
    cells = [["-" if v is None else str(v) for v in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(cells[0]))]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells
    )
