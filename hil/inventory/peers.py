"""A link's ``peer:``: which inventory host runs the reference peer against its DUT.

The reference peer (docs/peer.md) needs no RDMA hardware, only an IP route to
the DUT's port, so it runs on any host: a plain Linux host on the DUT's switch,
or the pair's other host (the virtual lab's default: guest B is the peer while
guest A is the DUT, then the other way round).  ``peer:`` is a host name, a
mapping ``{host, source, source6}`` or a list of these; an entry whose host is
one of the link's ends serves only against the other end (a host never runs the
peer against its own port).  :func:`peer_host_for` picks the peer for one DUT.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping

import yaml

from hil.errors import InputError
from hil.inventory.model import HOST_TCP_DRIVERS, Family, Host, LinkEnd, Pair, PeerSpec
from hil.inventory.nodes import NAME, NAME_WHAT, At, fields, given, known, matching, sequence, text

PEER_KEYS = ("host", "source", "source6")
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


def parse_peers(
    at: At, hosts: Mapping[str, Host], ends: tuple[LinkEnd, LinkEnd]
) -> tuple[PeerSpec, ...]:
    """The link's ``peer:`` at ``at``: one entry or a list of them, each host once."""
    items = sequence(at) if isinstance(at.node, yaml.SequenceNode) else [at]
    peers: list[PeerSpec] = []
    lines: dict[str, int] = {}
    for item in items:
        peer = _peer(item, hosts)
        if peer.host in lines:
            raise item.error(
                f"host {peer.host!r} is a peer of this link twice "
                f"(first at line {lines[peer.host]})"
            )
        _check_sources(item, peer, hosts, ends)
        lines[peer.host] = item.line
        peers.append(peer)
    return tuple(peers)


def _peer(at: At, hosts: Mapping[str, Host]) -> PeerSpec:
    if isinstance(at.node, yaml.ScalarNode):
        return PeerSpec(_host(at, hosts))
    f = fields(at, PEER_KEYS, required=("host",))
    source = _address(f["source"]) if given(f, "source") else None
    source6 = _address(f["source6"]) if given(f, "source6") else None
    if source6 is not None and not isinstance(source6, ipaddress.IPv6Address):
        raise f["source6"].error(
            f"{source6} is an IPv4 address; source6 takes an IPv6 one, source the IPv4 one"
        )
    if source6 is not None and (source is None or source.version == 6):
        raise f["source6"].error(
            "source6 is the IPv6 source beside an IPv4 source: give source an IPv4 address "
            "or write the IPv6 one as source"
        )
    return PeerSpec(_host(f["host"], hosts), source, source6)


def _host(at: At, hosts: Mapping[str, Host]) -> str:
    name = matching(at, NAME, NAME_WHAT)
    if name not in hosts:
        raise at.error(f"no host {name!r} in this inventory ({known(hosts)})")
    return name


def _address(at: At) -> IPAddress:
    value = text(at)
    try:
        return ipaddress.ip_address(value)
    except ValueError:
        raise at.error(
            f"{value!r} is not an IP address (a peer's source is one address, no prefix)"
        ) from None


def _check_sources(
    at: At, peer: PeerSpec, hosts: Mapping[str, Host], ends: tuple[LinkEnd, LinkEnd]
) -> None:
    """Refuse a source that is another host's port address, or the address of this host's
    own end of the link when its RNIC runs TCP itself (iw_cxgb4): the card, not the host's
    TCP, owns that address (docs/peer.md); siw's address is the host's, the lab's default."""
    for source in (peer.source, peer.source6):
        if source is None:
            continue
        for host in hosts.values():
            for rnic in host.rnics:
                if source not in {a.ip for a in (rnic.address, rnic.address6) if a is not None}:
                    continue
                if host.name != peer.host:
                    raise at.error(
                        f"source {source} is the address of {host.name}:{rnic.name}, not of "
                        f"the peer host {peer.host!r}; give one of {peer.host}'s own addresses"
                    )
                if LinkEnd(host.name, rnic.name) in ends and rnic.driver not in HOST_TCP_DRIVERS:
                    raise at.error(
                        f"source {source} is the address of {host.name}:{rnic.name}, this "
                        f"link's own port, whose {rnic.driver} runs TCP on the card; the peer "
                        "on the pair's other host uses another address of that host"
                    )


def peer_host_for(
    pair: Pair, dut_host: str, family: Family | None = None
) -> tuple[Host, IPAddress | None]:
    """The host that runs the reference peer against ``dut_host``'s port of ``pair``, and
    the source address it uses for ``family`` (default: the pair's first family), or None
    to let that host's routes choose.

    The first ``peer:`` entry whose host is not ``dut_host``; without one, the pair's
    other host (the lab default).  InputError when ``dut_host`` is not a host of the pair.
    """
    if dut_host not in (pair.host_a.name, pair.host_b.name):
        raise InputError(
            f"{dut_host!r} is not a host of pair {pair.name} "
            f"({pair.host_a.name}, {pair.host_b.name}); the DUT is one of its ends"
        )
    wanted = family or (pair.families or ("ipv4",))[0]
    for spec, host in zip(pair.link.peers, pair.peer_hosts, strict=True):
        if host.name != dut_host:
            return host, _source_of(spec, wanted)
    other = pair.host_b if dut_host == pair.host_a.name else pair.host_a
    return other, None


def _source_of(spec: PeerSpec, family: Family) -> IPAddress | None:
    """The entry's source address of ``family``, as ``Rnic.address_of`` picks one."""
    if family == "ipv6" and spec.source6 is not None:
        return spec.source6
    version = 6 if family == "ipv6" else 4
    return spec.source if spec.source is not None and spec.source.version == version else None
