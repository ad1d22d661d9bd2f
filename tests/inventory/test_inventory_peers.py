"""A link's ``peer:`` (hil/inventory/peers.py): its forms, its errors, and which host
runs the reference peer against each end (``peer_host_for``)."""

from __future__ import annotations

import ipaddress
import json
from pathlib import Path

import pytest

from hil.errors import InputError, InventoryError
from hil.inventory import inventory_document, load
from hil.inventory.model import PeerSpec
from hil.inventory.peers import peer_host_for

BASE = """\
hosts:
  a:
    ssh: {host: a.lab.example}
    rnics:
      - {name: p0, netdev: eth1, driver: iw_cxgb4, address: 198.18.0.1/24, address6: fd00::1/64}
  b:
    ssh: {host: b.lab.example}
    rnics:
      - {name: p0, netdev: eth1, driver: iw_cxgb4, address: 198.18.0.2/24, address6: fd00::2/64}
  c:
    ssh: {host: c.lab.example}
links:
  l1:
    ends: [a:p0, b:p0]
"""


def _load(tmp_path: Path, peer: str | None) -> Path:
    path = tmp_path / "lab.yaml"
    path.write_text(BASE + (f"    peer: {peer}\n" if peer is not None else ""))
    return path


def _peers(tmp_path: Path, peer: str | None) -> dict[str, tuple[str, str | None, str | None]]:
    """DUT host -> (peer host, its IPv4 source, its IPv6 source)."""
    pair = load(_load(tmp_path, peer)).pair("l1")
    found = {}
    for dut in ("a", "b"):
        host, v4 = peer_host_for(pair, dut, "ipv4")
        again, v6 = peer_host_for(pair, dut, "ipv6")
        assert again == host
        found[dut] = (host.name, str(v4) if v4 else None, str(v6) if v6 else None)
    return found


def test_without_peer_each_end_has_the_pairs_other_host(tmp_path: Path) -> None:
    assert _peers(tmp_path, None) == {"a": ("b", None, None), "b": ("a", None, None)}


def test_a_plain_host_serves_both_ends(tmp_path: Path) -> None:
    assert _peers(tmp_path, "c") == {"a": ("c", None, None), "b": ("c", None, None)}
    sourced = "{host: c, source: 198.18.0.9, source6: fd00::9}"
    assert _peers(tmp_path, sourced) == {
        "a": ("c", "198.18.0.9", "fd00::9"),
        "b": ("c", "198.18.0.9", "fd00::9"),
    }


def test_a_pair_host_serves_only_against_the_other_end(tmp_path: Path) -> None:
    # The pair's other host with its RNIC's address unused: a second address of its own.
    assert _peers(tmp_path, "[{host: b, source: 198.18.0.12}]") == {
        "a": ("b", "198.18.0.12", None),
        "b": ("a", None, None),  # never b against its own port: the default, a
    }
    both = "[{host: b, source: 198.18.0.12}, {host: a, source: 'fd00::11'}]"
    assert _peers(tmp_path, both) == {"a": ("b", "198.18.0.12", None), "b": ("a", None, "fd00::11")}


def test_the_first_entry_that_is_not_the_dut_wins(tmp_path: Path) -> None:
    assert _peers(tmp_path, "[a, c]") == {"a": ("c", None, None), "b": ("a", None, None)}


def test_family_defaults_to_the_pairs_first(tmp_path: Path) -> None:
    pair = load(_load(tmp_path, "{host: c, source: 198.18.0.9}")).pair("l1")
    assert peer_host_for(pair, "a")[1] == ipaddress.ip_address("198.18.0.9")


def test_a_dut_that_is_not_a_host_of_the_pair_is_bad_input(tmp_path: Path) -> None:
    pair = load(_load(tmp_path, None)).pair("l1")
    with pytest.raises(InputError, match=r"'c' is not a host of pair l1 \(a, b\)"):
        peer_host_for(pair, "c")


def test_peer_loads_back_from_show_json(tmp_path: Path) -> None:
    inv = load(_load(tmp_path, "[{host: b, source: 198.18.0.12}, c]"))
    assert inv.link("l1").peers == (
        PeerSpec("b", ipaddress.ip_address("198.18.0.12")),
        PeerSpec("c"),
    )
    doc = inventory_document(inv)
    assert doc["links"]["l1"]["peer"] == [
        {"host": "b", "source": "198.18.0.12", "source6": None},
        {"host": "c", "source": None, "source6": None},
    ]
    again = tmp_path / "again.yaml"
    again.write_text(json.dumps({"hosts": doc["hosts"], "links": doc["links"]}))
    assert load(again).link("l1") == inv.link("l1")


ERRORS = [
    ("unknown-host", "d", "links.l1.peer: no host 'd' in this inventory (hosts: a, b, c)"),
    ("unknown-key", "{host: c, src: 198.18.0.9}", "links.l1.peer.src: unknown key 'src'"),
    ("no-host", "{source: 198.18.0.9}", "links.l1.peer: missing required key 'host'"),
    (
        "twice",
        "[c, {host: c, source: 198.18.0.9}]",
        "links.l1.peer[1]: host 'c' is a peer of this link twice (first at line 15)",
    ),
    (
        "source-with-prefix",
        "{host: c, source: 198.18.0.9/24}",
        "links.l1.peer.source: '198.18.0.9/24' is not an IP address (a peer's source is one "
        "address, no prefix)",
    ),
    (
        "source6-ipv4",
        "{host: c, source: 198.18.0.9, source6: 198.18.0.10}",
        "links.l1.peer.source6: 198.18.0.10 is an IPv4 address; source6 takes an IPv6 one, "
        "source the IPv4 one",
    ),
    (
        "source6-alone",
        "{host: c, source6: 'fd00::9'}",
        "links.l1.peer.source6: source6 is the IPv6 source beside an IPv4 source: give source "
        "an IPv4 address or write the IPv6 one as source",
    ),
    (
        "another-hosts-address",
        "{host: c, source: 198.18.0.2}",
        "links.l1.peer: source 198.18.0.2 is the address of b:p0, not of the peer host 'c'; "
        "give one of c's own addresses",
    ),
    (
        "its-own-rnic-address",
        "{host: b, source: 'fd00::2'}",
        "links.l1.peer: source fd00::2 is the address of b:p0, this link's own port, whose "
        "iw_cxgb4 runs TCP on the card; the peer on the pair's other host uses another "
        "address of that host",
    ),
]


@pytest.mark.parametrize(("peer", "message"), [e[1:] for e in ERRORS], ids=[e[0] for e in ERRORS])
def test_bad_peer_is_a_located_error(tmp_path: Path, peer: str, message: str) -> None:
    path = _load(tmp_path, peer)
    with pytest.raises(InventoryError) as caught:
        load(path)
    assert str(caught.value).startswith(f"{path}:"), caught.value
    assert message in str(caught.value)
