"""Can each link's peer host reach its DUT?  ``hil inventory check --peers``.

The reference peer (docs/peer.md) runs on the host
:func:`hil.inventory.peers.peer_host_for` picks for each end of a pair.  Its
connections go wherever that host routes the DUT's address, so before a run
this asks the peer host itself, over SSH, ``ip -j route get ADDR [from SOURCE]``
for each family of the pair (ip-route(8), "ip route get": the route the kernel
would use for a packet to ADDR) and then whether the route's source address is
the host's own (``ip route get SOURCE`` is of type ``local``).  The offload rule:
a source that is the address of an end of this link whose driver runs TCP itself
(iw_cxgb4) is refused, since the card, not the host's TCP, owns that address.
"""

from __future__ import annotations

import ipaddress
import json
from dataclasses import dataclass

from hil import tools
from hil.host.hosts import Hosts
from hil.inventory.model import HOST_TCP_DRIVERS, Pair
from hil.inventory.peers import IPAddress, peer_host_for

ROUTE_TIMEOUT = 10.0  # seconds for one `ip route get` on a peer host


@dataclass(frozen=True)
class PeerRoute:
    """One peer host's route to one DUT address: ``problem`` is None when it is usable."""

    pair: str
    peer: str
    dut: str  # HOST:PORT
    address: IPAddress
    source: IPAddress | None
    problem: str | None

    def __str__(self) -> str:
        what = f"{self.pair}: peer host {self.peer} -> DUT {self.dut} {self.address}"
        if self.problem is not None:
            return f"{what}: {self.problem}"
        return f"{what}: routed from {self.source}"


def peer_routes(hosts: Hosts, pair: Pair) -> list[PeerRoute]:
    """The route of each end's peer host to that end's address, for each family of the pair."""
    routes = []
    for end in (pair.link.a, pair.link.b):
        rnic = hosts.host(end.host).rnic(end.port)
        for family in pair.families:
            peer, source = peer_host_for(pair, end.host, family)
            address = rnic.address_of(family)
            assert address is not None  # pair.families holds the families both ends have
            found, problem = _route(hosts, peer.name, address.ip, source)
            if problem is None and found is not None:
                problem = _offloaded_source(pair, peer.name, found)
            routes.append(PeerRoute(pair.name, peer.name, str(end), address.ip, found, problem))
    return routes


def _route(
    hosts: Hosts, peer: str, address: IPAddress, source: IPAddress | None
) -> tuple[IPAddress | None, str | None]:
    """The source ``peer`` reaches ``address`` from, or why it does not."""
    argv = [str(address)] + (["from", str(source)] if source is not None else [])
    route, why = _route_get(hosts, peer, argv)
    if route is None:
        return None, f"no route: ip route get {' '.join(argv)} said: {why}"
    if route.get("type", "unicast") != "unicast":
        return None, f"no route: ip route get {' '.join(argv)} gave a {route['type']} route"
    found = source or route.get("prefsrc")
    if not found:
        return None, f"ip route get {' '.join(argv)} gave no source address: {route}"
    chosen = ipaddress.ip_address(str(found))
    local, why = _route_get(hosts, peer, [str(chosen)])
    if local is None or local.get("type") != "local":
        said = why if local is None else f"a {local.get('type', 'unicast')} route"
        return None, f"source {chosen} is not an address of {peer} (ip route get {chosen}: {said})"
    return chosen, None


def _route_get(hosts: Hosts, peer: str, argv: list[str]) -> tuple[dict[str, str] | None, str]:
    """The first route ``ip -j route get ARGV`` prints on ``peer``, or None and why not."""
    result = hosts.session(peer).run(
        tools.argv("ip", "-j", "route", "get", *argv), timeout=ROUTE_TIMEOUT, check=False
    )
    if result.status != 0:
        return None, result.why()
    try:
        routes = json.loads(result.stdout)
        return dict(routes[0]), ""
    except (ValueError, IndexError, KeyError, TypeError):
        return None, f"unreadable output {result.stdout.strip()[:200]!r}"


def _offloaded_source(pair: Pair, peer: str, source: IPAddress) -> str | None:
    """Why ``source`` cannot be the peer's: it is an offloading RNIC end's own address."""
    for end in (pair.link.a, pair.link.b):
        host = pair.host_a if end.host == pair.host_a.name else pair.host_b
        rnic = host.rnic(end.port)
        mine = {a.ip for a in (rnic.address, rnic.address6) if a is not None}
        if end.host == peer and source in mine and rnic.driver not in HOST_TCP_DRIVERS:
            return (
                f"the route's source {source} is {end}'s own address, and {rnic.driver} runs "
                "TCP on the card, not in the host: give the link a peer: entry for "
                f"{peer} with another source address (docs/inventory.md)"
            )
    return None
