"""The lab inventory is read by hil's own inventory loader, unchanged."""

from __future__ import annotations

import ipaddress
import time
from pathlib import Path

from hil.inventory import loader
from hil.inventory.model import Power
from hil.lab import bootfiles, inventory, network
from hil.lab.state import GuestState, LabState


def lab_state(
    lab_dir: Path, n: int, middlebox: bool = False
) -> tuple[LabState, list[network.Cable]]:
    """The state ``up`` records for an ``n``-guest lab in ``lab_dir`` (the processes made up),
    a middlebox lab with ``middlebox``."""
    lab = network.lab_id(lab_dir)
    ports = network.Ports(
        ssh=tuple(2200 + i for i in range(n)), cables=tuple(3300 + i for i in range(2 * (n - 1)))
    )
    names = [network.guest_name(lab, i) for i in range(n)]
    guests = tuple(
        GuestState(
            name,
            i,
            100 + i,
            100 + i,
            ports.ssh[i],
            str(lab_dir / f"{name}.qmp"),
            str(lab_dir / f"{name}.log"),
        )
        for i, name in enumerate(names)
    )
    state = LabState(
        str(lab_dir), "boot", time.time(), "tcg", "/k", ports.cables, guests, middlebox=middlebox
    )
    return state, network.cables(lab, n, ports.cables, middlebox)


def test_two_guest_inventory_loads_with_strict_host_keys_and_siw(tmp_path: Path) -> None:
    state, cables = lab_state(tmp_path, 2)
    lab = network.lab_id(tmp_path)
    inv = loader.load(inventory.write(state, cables))
    assert sorted(inv.hosts) == [f"{lab}-0", f"{lab}-1"]
    h = inv.hosts[f"{lab}-1"]
    assert (h.ssh.host, h.ssh.port, h.ssh.user, h.ssh.host_key_policy) == (
        "127.0.0.1",
        2201,
        "root",
        "strict",
    )
    assert h.ssh.known_hosts == str(tmp_path / bootfiles.KNOWN_HOSTS)
    assert h.ssh.identity_file == str(tmp_path / bootfiles.CLIENT_KEY)
    assert h.python == "/usr/bin/python3"
    assert set(h.tags) == {"virtual", "siw"}
    assert dict(h.sysctls)["net.ipv4.tcp_retries2"] == "5"
    assert h.power == Power(mode="qmp", qmp=str(tmp_path / f"{lab}-1.qmp"), lab=str(tmp_path))
    (p0,) = h.rnics
    assert (p0.name, p0.netdev, p0.driver, p0.rdma_device, p0.fallback, p0.mtu) == (
        "p0",
        "data0",
        "siw",
        "siw_data0",
        "siw",
        1500,
    )
    assert p0.address == ipaddress.ip_interface("198.18.0.2/24")
    assert p0.address6 == ipaddress.IPv6Interface("2001:2::2/64")
    pair = inv.pair(f"{lab}-0-1")
    assert (str(pair.link.a), str(pair.link.b)) == (f"{lab}-0:p0", f"{lab}-1:p0")
    carrier = pair.link.pull("carrier")
    assert (carrier.qmp, carrier.qmp_netdev, str(carrier.end)) == (
        str(tmp_path / f"{lab}-0.qmp"),
        "data0",
        f"{lab}-0:p0",
    )
    assert {p.mode for p in pair.link.pulls} == {"carrier", "admin", "blackhole"}


def test_three_guest_inventory_has_a_chain_of_two_links(tmp_path: Path) -> None:
    state, cables = lab_state(tmp_path, 3)
    lab = network.lab_id(tmp_path)
    inv = loader.load(inventory.write(state, cables))
    assert list(inv.links) == [f"{lab}-0-1", f"{lab}-1-2"]
    assert [r.name for r in inv.hosts[f"{lab}-1"].rnics] == ["p0", "p1"]
    assert str(inv.pair(f"{lab}-1-2").link.a) == f"{lab}-1:p1"


def test_two_labs_share_no_host_or_link_name(tmp_path: Path) -> None:
    dirs = (tmp_path / "a", tmp_path / "b")
    for d in dirs:
        d.mkdir()
    invs = [loader.load(inventory.write(*lab_state(d, 2))) for d in dirs]
    assert not set(invs[0].hosts) & set(invs[1].hosts)
    assert not set(invs[0].links) & set(invs[1].links)


def test_guest_boot_files_match_the_inventory(tmp_path: Path) -> None:
    _, cables = lab_state(tmp_path, 2)
    client = bootfiles.write_client_key(tmp_path)
    name = network.guest_name(network.lab_id(tmp_path), 1)
    host_pub = bootfiles.write_guest(tmp_path, 1, name, cables, client)
    conf = bootfiles.guest_conf_dir(tmp_path, name)
    assert (conf / "authorized_keys").read_text().strip() == client
    assert (conf / "nics").read_text().splitlines() == [
        "52:54:00:00:01:00 mgmt0 10.0.2.15/24 -",
        "52:54:00:01:01:00 data0 198.18.0.2/24 2001:2::2/64",
    ]
    assert (conf / "siw").read_text() == "siw_data0 data0\n"
    assert "net.ipv4.tcp_retries2=5" in (conf / "sysctls").read_text().splitlines()
    assert "Subsystem sftp /usr/lib/openssh/sftp-server" in (conf / "sshd_config").read_text()
    known = bootfiles.write_known_hosts(tmp_path, [(2201, host_pub)])
    assert known.read_text() == "[127.0.0.1]:2201 " + " ".join(host_pub.split()[:2]) + "\n"


def test_a_middlebox_lab_has_one_link_whose_impairment_point_is_the_middlebox(
    tmp_path: Path,
) -> None:
    # hil's own loader, as `hil inventory check` reads it: it refuses a middlebox that does
    # not face both of the link's ends (hil/inventory/impairs.py).
    state, cables = lab_state(tmp_path, 3, middlebox=True)
    lab = network.lab_id(tmp_path)
    inv = loader.load(inventory.write(state, cables))
    (pair,) = inv.pairs()
    assert pair.name == f"{lab}-0-1"
    assert (str(pair.link.a), str(pair.link.b)) == (f"{lab}-0:p0", f"{lab}-1:p0")
    impair = pair.link.impair
    assert (impair.mode, impair.host) == ("middlebox", f"{lab}-2")
    assert (impair.netdev_toward(pair.link.a), impair.netdev_toward(pair.link.b)) == (
        "data0",
        "data1",
    )
    mbox = inv.hosts[f"{lab}-2"]
    assert (mbox.rnics, set(mbox.tags)) == ((), {"virtual", "middlebox"})
    b = inv.hosts[f"{lab}-1"].rnic("p0")
    assert b.address == ipaddress.ip_interface("198.18.0.2/24")  # one subnet, A to B


def test_the_middlebox_bridges_its_two_nics_and_has_no_siw(tmp_path: Path) -> None:
    _, cables = lab_state(tmp_path, 3, middlebox=True)
    client = bootfiles.write_client_key(tmp_path)
    name = network.guest_name(network.lab_id(tmp_path), network.MIDDLEBOX)
    bootfiles.write_guest(tmp_path, network.MIDDLEBOX, name, cables, client)
    conf = bootfiles.guest_conf_dir(tmp_path, name)
    assert (conf / "nics").read_text().splitlines()[1:] == [
        "52:54:00:01:02:00 data0 - -",
        "52:54:00:01:02:01 data1 - -",
    ]
    assert (conf / "siw").read_text() == ""
    assert (conf / "bridge").read_text() == "br0 data0 data1\n"
    a = network.guest_name(network.lab_id(tmp_path), 0)
    bootfiles.write_guest(tmp_path, 0, a, cables, client)
    assert (bootfiles.guest_conf_dir(tmp_path, a) / "bridge").read_text() == ""
