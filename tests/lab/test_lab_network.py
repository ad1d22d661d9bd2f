"""The lab's wiring: chain of cables, MACs, addresses, and port allocation."""

from __future__ import annotations

import re
import socket
from pathlib import Path

import pytest

from hil.errors import InputError, LabError
from hil.lab import network

LAB = "lab1a2b"


def test_two_guests_have_one_cable_data0_to_data0() -> None:
    (cable,) = network.cables(LAB, 2, (40001, 40002))
    assert cable.name == "lab1a2b-0-1"
    assert (cable.a.guest, cable.a.nic.netdev, cable.a.nic.address) == (0, "data0", "198.18.0.1/24")
    assert (cable.b.guest, cable.b.nic.netdev, cable.b.nic.address) == (1, "data0", "198.18.0.2/24")
    assert (cable.a.port, cable.b.port) == (40001, 40002)
    assert network.cable_ports(1, [cable]) == [40002]


def test_three_guests_chain_and_the_middle_one_has_two_data_nics() -> None:
    cables = network.cables(LAB, 3, (1, 2, 3, 4))
    assert [c.name for c in cables] == ["lab1a2b-0-1", "lab1a2b-1-2"]
    middle = network.data_nics(1, cables)
    assert [(c.name, n.netdev, n.address, n.address6) for c, n in middle] == [
        ("lab1a2b-0-1", "data0", "198.18.0.2/24", "2001:2::2/64"),
        ("lab1a2b-1-2", "data1", "198.18.1.1/24", "2001:2:0:1::1/64"),
    ]


def test_a_middlebox_lab_wires_a_to_m_to_b_and_its_one_link_is_a_to_b() -> None:
    to_m, to_b = network.cables(LAB, 3, (1, 2, 3, 4), middlebox=True)
    ends = [
        (e.guest, e.nic.netdev, e.nic.address, e.port) for c in (to_m, to_b) for e in (c.a, c.b)
    ]
    # M (guest 2) has no address on either NIC: it bridges them.
    assert ends == [
        (0, "data0", "198.18.0.1/24", 1),
        (2, "data0", None, 2),
        (2, "data1", None, 3),
        (1, "data0", "198.18.0.2/24", 4),
    ]
    (link,) = network.links([to_m, to_b], middlebox=True)
    assert link.name == "lab1a2b-0-1"  # the two-guest lab's pair name
    assert (link.a, link.b) == (to_m.a, to_b.b)
    assert link.middlebox == (to_m.b, to_b.a)
    assert [link.name for link in network.links([to_m], middlebox=False)] == ["lab1a2b-0-2"]


def test_a_middlebox_lab_has_three_guests() -> None:
    with pytest.raises(LabError, match="a middlebox lab has 3 guests, not 4"):
        network.cables(LAB, 4, tuple(range(6)), middlebox=True)


def test_names_carry_the_lab_id_of_the_directory(tmp_path: Path) -> None:
    lab = network.lab_id(tmp_path / "lab")
    assert re.fullmatch(r"lab[0-9a-f]{4}", lab)
    assert network.guest_name(lab, 1) == f"{lab}-1"
    assert network.GUEST_NAME.fullmatch(network.guest_name(lab, 1))
    # Another directory, another id: two labs share no host or link name.
    assert network.lab_id(tmp_path / "other") != lab


def test_every_spelling_of_a_directory_gives_one_lab_id(tmp_path: Path) -> None:
    (tmp_path / "real" / "lab").mkdir(parents=True)
    (tmp_path / "link").symlink_to(tmp_path / "real")
    ids = {
        network.lab_id(p)
        for p in (
            tmp_path / "real" / "lab",
            tmp_path / "link" / "lab",
            tmp_path / "real" / ".." / "real" / "lab",
        )
    }
    assert ids == {network.lab_id(tmp_path / "real" / "lab")}


def test_every_mac_of_a_lab_is_distinct() -> None:
    n = network.MAX_GUESTS
    cables = network.cables(LAB, n, tuple(range(2 * (n - 1))))
    macs = [network.mgmt_nic(g).mac for g in range(n)]
    macs += [nic.mac for g in range(n) for _, nic in network.data_nics(g, cables)]
    assert len(macs) == len(set(macs)) == n + 2 * (n - 1)


@pytest.mark.parametrize("n", [0, 1, network.MAX_GUESTS + 1])
def test_guest_count_out_of_range_is_bad_input(n: int) -> None:
    with pytest.raises(InputError, match="--hosts must be between 2 and"):
        network.allocate_ports(n)


def test_ports_are_distinct_free_and_not_in_avoid() -> None:
    first = network.allocate_ports(3)
    ports = [*first.ssh, *first.cables]
    assert len(first.ssh) == 3 and len(first.cables) == 4  # two UDP ports per cable
    assert len(ports) == len(set(ports)) == 7
    again = network.free_ports(5, avoid=ports)
    assert not set(again) & set(ports)
    for p in first.ssh:  # each is bindable right now: TCP for SSH, UDP for the cables
        with socket.socket() as s:
            s.bind(("127.0.0.1", p))
    for p in first.cables:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.bind(("127.0.0.1", p))


def test_two_labs_side_by_side_get_disjoint_ports() -> None:
    lab_a = network.allocate_ports(2)
    held = []
    try:
        for p in (*lab_a.ssh, *lab_a.cables):  # lab A's QEMUs hold their ports
            s = socket.socket()
            held.append(s)
            s.bind(("127.0.0.1", p))
            s.listen()
        lab_b = network.allocate_ports(2)
    finally:
        for s in held:
            s.close()
    assert not {*lab_a.ssh, *lab_a.cables} & {*lab_b.ssh, *lab_b.cables}
