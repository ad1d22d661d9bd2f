"""``hil host info HOST``: a host's kernel, RDMA devices and ports, links and addresses."""

from __future__ import annotations

import argparse
import json
from typing import Any

from hil.cli.options import Subparsers, json_option
from hil.errors import EXIT_OK
from hil.host.hosts import Hosts
from hil.inventory import load_from_args


def register(cmds: Subparsers) -> None:
    """Add ``hil host info`` to ``cmds``."""
    p = cmds.add_parser("info", help="kernel, RDMA devices, links and addresses of a host")
    p.add_argument("host", metavar="HOST")
    json_option(p)
    p.set_defaults(func=_info)


def host_info(hosts: Hosts, name: str) -> dict[str, Any]:
    """What ``hil host info`` shows, as a JSON-safe dict."""
    from hil.agent import AgentCallError

    agent = hosts.agent(name)
    rdma: dict[str, Any] = {"available": True, "error": None, "devices": [], "ports": []}
    try:
        rdma["devices"] = [vars(d) for d in agent.rdma_devices()]
        rdma["ports"] = [vars(p) for p in agent.rdma_links()]
    except AgentCallError as e:
        if e.kind != "rdma_unavailable":
            raise
        rdma.update(available=False, error=str(e))
    addresses: dict[str, list[str]] = {}
    for a in agent.addresses():
        addresses.setdefault(a.netdev, []).append(str(a.address))
    links = [{**vars(li), "addresses": addresses.get(li.name, [])} for li in agent.links()]
    return {
        "host": name,
        "kernel": agent.hello.kernel,
        "python": agent.hello.python,
        "rdma": rdma,
        "links": links,
    }


def _info(args: argparse.Namespace) -> int:
    with Hosts(load_from_args(args.inventory)) as hosts:
        info = host_info(hosts, args.host)
    if args.json:
        print(json.dumps(info))
        return EXIT_OK
    print(f"{info['host']}: kernel {info['kernel']}, python {info['python']}")
    rdma = info["rdma"]
    if not rdma["available"]:
        print(f"RDMA: unavailable ({rdma['error']})")
    elif not rdma["ports"]:
        print("RDMA: no devices")
    for p in rdma["ports"]:
        print(
            f"RDMA: {p['device']}/{p['port']} {p['state']} ({p['physical_state']}) "
            f"netdev {p['netdev'] or '-'}"
        )
    for li in info["links"]:
        state = "carrier" if li["carrier"] else "no-carrier"
        print(
            f"  {li['name']:<16} {li['operstate']:<8} {'up' if li['up'] else 'down':<5} "
            f"mtu {li['mtu']:<6} {state:<11} {' '.join(li['addresses'])}".rstrip()
        )
    return EXIT_OK
