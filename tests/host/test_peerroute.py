"""Each link's peer host asked, over SSH on the netns lab, for its route to the DUT
(hil/host/peerroute.py): routed, no route, a source the host does not have, and an
offloading RNIC's own address."""

from __future__ import annotations

from pathlib import Path

import pytest
from netnslab.lab import NetnsLab

from hil.host.hosts import Hosts
from hil.host.peerroute import peer_routes
from hil.inventory import load

pytestmark = pytest.mark.netns


def _routes(lab: NetnsLab, tmp_path: Path, edits: dict[str, str], peer: str | None) -> list[str]:
    """The routes of the lab's one pair, its inventory edited (old -> new) and given ``peer``."""
    text = lab.inventory_path.read_text()
    for old, new in edits.items():
        assert old in text, old
        text = text.replace(old, new, 1)
    path = tmp_path / "inventory.yaml"
    path.write_text(text + (f"    peer: {peer}\n" if peer else ""))
    inv = load(path)
    with Hosts(inv) as hosts:
        return [str(r) for r in peer_routes(hosts, inv.pair("ns0-ns1"))]


def test_each_end_is_routed_from_the_pairs_other_host(netns_lab: NetnsLab, tmp_path: Path) -> None:
    assert _routes(netns_lab, tmp_path, {}, None) == [
        "ns0-ns1: peer host ns1 -> DUT ns0:p0 198.18.0.1: routed from 198.18.0.2",
        "ns0-ns1: peer host ns0 -> DUT ns1:p0 198.18.0.2: routed from 198.18.0.1",
    ]


def test_a_family_the_peer_host_has_no_route_for_is_refused(
    netns_lab: NetnsLab, tmp_path: Path
) -> None:
    # The inventory gives both ports an IPv6 address that no namespace has (pair setup
    # would add it): neither peer host routes fd00:99::/64.
    edits = {
        "address: 198.18.0.1/24": "address: 198.18.0.1/24\n        address6: fd00:99::1/64",
        "address: 198.18.0.2/24": "address: 198.18.0.2/24\n        address6: fd00:99::2/64",
    }
    routes = _routes(netns_lab, tmp_path, edits, None)
    assert routes[0] == "ns0-ns1: peer host ns1 -> DUT ns0:p0 198.18.0.1: routed from 198.18.0.2"
    assert routes[1] == (
        "ns0-ns1: peer host ns1 -> DUT ns0:p0 fd00:99::1: no route: ip route get fd00:99::1 "
        "said: RTNETLINK answers: Network is unreachable"
    )
    assert routes[3].startswith("ns0-ns1: peer host ns0 -> DUT ns1:p0 fd00:99::2: no route: ")


def test_a_source_the_peer_host_does_not_have_is_refused(
    netns_lab: NetnsLab, tmp_path: Path
) -> None:
    routes = _routes(netns_lab, tmp_path, {}, "[{host: ns1, source: 198.18.0.9}]")
    assert routes[0] == (
        "ns0-ns1: peer host ns1 -> DUT ns0:p0 198.18.0.1: no route: ip route get 198.18.0.1 "
        "from 198.18.0.9 said: RTNETLINK answers: Network is unreachable"
    )
    assert routes[1] == "ns0-ns1: peer host ns0 -> DUT ns1:p0 198.18.0.2: routed from 198.18.0.1"


def test_the_route_from_an_offloading_rnics_own_address_is_refused(
    netns_lab: NetnsLab, tmp_path: Path
) -> None:
    # ns1's port as an iw_cxgb4 one (without the blackhole pull the loader refuses there):
    # the default peer on ns1 would use the card's own address.
    port = "driver: siw\n        fallback: siw\n        address: 198.18.0.2/24"
    edits = {
        port: port.replace("siw", "iw_cxgb4", 1),
        "      - mode: blackhole\n        end: ns1:p0\n": "",
    }
    routes = _routes(netns_lab, tmp_path, edits, None)
    assert routes[0] == (
        "ns0-ns1: peer host ns1 -> DUT ns0:p0 198.18.0.1: the route's source 198.18.0.2 is "
        "ns1:p0's own address, and iw_cxgb4 runs TCP on the card, not in the host: give the "
        "link a peer: entry for ns1 with another source address (docs/inventory.md)"
    )


def test_an_ipv6_source_the_peer_host_does_not_have_is_refused(
    netns_lab: NetnsLab, tmp_path: Path
) -> None:
    # IPv6 routes a packet from any source (ip route get answers), so the source's own
    # check, ip route get SOURCE of type local, is what refuses this one.
    v6 = {0: "fd00:99::1", 1: "fd00:99::2"}
    for host, address in v6.items():
        netns_lab.exec(host, ["ip", "-6", "addr", "add", f"{address}/64", "dev", "data0", "nodad"])
    try:
        edits = {
            "address: 198.18.0.1/24": "address: 198.18.0.1/24\n        address6: fd00:99::1/64",
            "address: 198.18.0.2/24": "address: 198.18.0.2/24\n        address6: fd00:99::2/64",
        }
        peer = "[{host: ns1, source: 198.18.0.2, source6: 'fd00:99::9'}]"
        routes = _routes(netns_lab, tmp_path, edits, peer)
    finally:
        for host, address in v6.items():
            netns_lab.exec(host, ["ip", "-6", "addr", "del", f"{address}/64", "dev", "data0"])
    assert routes == [
        "ns0-ns1: peer host ns1 -> DUT ns0:p0 198.18.0.1: routed from 198.18.0.2",
        "ns0-ns1: peer host ns1 -> DUT ns0:p0 fd00:99::1: source fd00:99::9 is not an address "
        "of ns1 (ip route get fd00:99::9: a unicast route)",
        "ns0-ns1: peer host ns0 -> DUT ns1:p0 198.18.0.2: routed from 198.18.0.1",
        "ns0-ns1: peer host ns0 -> DUT ns1:p0 fd00:99::2: routed from fd00:99::1",
    ]
