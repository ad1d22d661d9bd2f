"""Loading valid inventories: what the dataclasses hold, defaults and paths."""

from __future__ import annotations

import ipaddress
import json
from pathlib import Path

import pytest

from hil.errors import InputError, InventoryError
from hil.inventory import (
    CaptureSpec,
    Inventory,
    LinkEnd,
    SshConfig,
    inventory_document,
    load,
    load_from_args,
)

EXAMPLE = Path(__file__).resolve().parents[2] / "inventory" / "example-lab.yaml"


@pytest.fixture(scope="module")
def example() -> Inventory:
    return load(EXAMPLE)


def test_example_has_two_chelsio_pairs_an_e810_pair_and_a_siw_pair(example: Inventory) -> None:
    drivers = {p.name: (p.rnic_a.driver, p.rnic_b.driver) for p in example.pairs()}
    assert drivers == {
        "t6-pair-1": ("iw_cxgb4", "iw_cxgb4"),
        "t5-pair-1": ("iw_cxgb4", "iw_cxgb4"),
        "e810-pair-1": ("irdma", "irdma"),
        "siw-pair-1": ("siw", "siw"),
    }
    siw = example.pair("siw-pair-1")
    assert (siw.rnic_a.rdma_device, siw.rnic_a.fallback) == (None, "siw")
    assert [p.rnic_a.rdma_device for p in example.pairs()[:2]] == ["cxgb4_0", "cxgb4_0"]


def test_example_port_values(example: Inventory) -> None:
    t6a = example.hosts["t6-a"].rnic("p0")
    assert t6a.address == ipaddress.ip_interface("198.18.1.1/24")
    assert (t6a.netdev, t6a.mtu, t6a.speed, t6a.firmware) == ("enp1s0f4", 9000, 25000, "1.27.4.0")
    assert isinstance(example.hosts["t5-a"].rnic("p1").address, ipaddress.IPv6Interface)
    assert example.hosts["t6-a"].sysctls == (("net.ipv4.tcp_retries2", "5"),)
    assert example.hosts["t6-a"].tags == ("t6", "rack3")


def test_example_ssh_merge_keys_and_paths(example: Inventory) -> None:
    # t6-b merges t6-a's ssh mapping (<<: *lab_ssh) and overrides only host.
    ssh = example.hosts["t6-b"].ssh
    assert ssh.host == "t6-b.lab.example"
    assert (ssh.jump, ssh.port, ssh.user, ssh.connect_timeout) == ("bastion", 22, "root", 10.0)
    assert ssh.identity_file == str(Path("~/.ssh/hil_lab").expanduser())
    assert ssh.host_key_policy == "strict"
    assert example.hosts["bastion"].ssh.jump is None
    assert example.hosts["bastion"].rnics == ()


def test_example_pulls(example: Inventory) -> None:
    link = example.links["t6-pair-1"]
    # No blackhole: a T6 offloads TCP, host filters would pull nothing.
    assert [p.mode for p in link.pulls] == ["admin", "command"]
    assert example.links["siw-pair-1"].pull("blackhole").end == LinkEnd("gen-b", "p0")
    assert example.pair("t6-pair-1").module_params == {
        "iw_cxgb4": {"ep_timeout_secs": "10", "mpa_rev": "2"}
    }
    command = link.pull("command")
    assert command.controller == "switch-ctl"
    assert command.down == ("/usr/local/bin/swctl", "port", "{port}", "disable")
    assert command.vars == (("port", "Eth1/3"),)
    # Without `end:` admin and blackhole act on the link's first end; command
    # and carrier pulls have no end unless one is given.
    assert example.links["t5-pair-1"].pull("admin").end == LinkEnd("t5-a", "p0")
    assert example.links["t5-pair-1"].pull("command").end is None


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


MINIMAL = """\
hosts:
  a:
    ssh: {host: a.example}
    rnics: [{name: p0, netdev: eth0, driver: siw}]
  b:
    ssh: {host: b.example}
    rnics: [{name: p0, netdev: eth0, driver: siw}]
links:
  l: {ends: [a:p0, b:p0]}
"""


def test_defaults(tmp_path: Path) -> None:
    inv = load(_write(tmp_path / "lab.yaml", MINIMAL))
    host = inv.hosts["a"]
    assert host.ssh == SshConfig(host="a.example")
    assert (host.python, host.tags, host.sysctls) == ("python3", (), ())
    rnic = host.rnic("p0")
    assert (rnic.rdma_device, rnic.address, rnic.mtu, rnic.speed, rnic.fallback) == (None,) * 5
    assert inv.links["l"].pulls == ()
    assert inv.links["l"].capture == CaptureSpec(mode="ends")
    assert inv.path == tmp_path / "lab.yaml"


CAPTURES = """\
  tap:
    ssh: {host: tap.example}
links:
  ends: {ends: [a:p0, b:p0]}
  host: {ends: [a:p1, b:p1], capture: {mode: host, host: tap, netdev: enp3s0}}
  command:
    ends: [a:p2, b:p2]
    capture:
      mode: command
      controller: tap
      start: [cap, start, "{port}", "{id}"]
      stop: [cap, stop, "{id}"]
      fetch: [cap, get, "{id}", --link, "{link}", "{pcap}"]
      vars: {port: Eth1/3}
  none: {ends: [a:p3, b:p3], capture: none}
  none2: {ends: [a:p4, b:p4], capture: {mode: none}}
"""


def test_capture_points(tmp_path: Path) -> None:
    ports = "[" + ", ".join(f"{{name: p{i}, netdev: eth{i}, driver: siw}}" for i in range(5)) + "]"
    text = MINIMAL.replace("[{name: p0, netdev: eth0, driver: siw}]", ports)
    inv = load(_write(tmp_path / "lab.yaml", text.split("links:")[0] + CAPTURES))
    captures = {name: link.capture for name, link in inv.links.items()}
    assert captures["ends"] == CaptureSpec(mode="ends")
    assert captures["host"] == CaptureSpec(mode="host", host="tap", netdev="enp3s0")
    assert captures["command"] == CaptureSpec(
        mode="command",
        controller="tap",
        start=("cap", "start", "{port}", "{id}"),
        stop=("cap", "stop", "{id}"),
        fetch=("cap", "get", "{id}", "--link", "{link}", "{pcap}"),
        vars=(("port", "Eth1/3"),),
    )
    assert captures["none"] == captures["none2"] == CaptureSpec(mode="none")
    # The JSON document loads back into the same capture points.
    doc = inventory_document(inv)
    doc.pop("pairs")
    again = load(_write(tmp_path / "again.yaml", json.dumps(doc)))
    assert again.links == inv.links


def test_null_means_not_set(tmp_path: Path) -> None:
    text = MINIMAL.replace("driver: siw}]\n  b", "driver: siw, mtu: ~, rdma_device: null}]\n  b")
    text = text.replace("{host: a.example}", "{host: a.example, port: null}")
    inv = load(_write(tmp_path / "lab.yaml", text))
    assert inv.hosts["a"].ssh.port == 22
    assert inv.hosts["a"].rnic("p0").mtu is None


def test_relative_paths_are_taken_from_the_inventory_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = MINIMAL.replace(
        "{host: a.example}",
        "{host: a.example, identity_file: keys/id, known_hosts: ../known}",
    ).replace(
        "{ends: [a:p0, b:p0]}",
        "{ends: [a:p0, b:p0], pull: [{mode: carrier, qmp: run/g0.qmp, netdev: data0}]}",
    )
    _write(tmp_path / "lab" / "inv.yaml", text)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    inv = load("../lab/inv.yaml")
    ssh = inv.hosts["a"].ssh
    assert ssh.identity_file == str(tmp_path / "lab" / "keys" / "id")
    assert ssh.known_hosts == str(tmp_path / "known")
    carrier = inv.links["l"].pull("carrier")
    assert (carrier.qmp, carrier.qmp_netdev) == (str(tmp_path / "lab" / "run" / "g0.qmp"), "data0")
    assert carrier.end is None


def test_carrier_pull_with_end(tmp_path: Path) -> None:
    text = MINIMAL.replace(
        "{ends: [a:p0, b:p0]}",
        "{ends: [a:p0, b:p0], pull: [{mode: carrier, qmp: /q, netdev: d0, end: b:p0}]}",
    )
    inv = load(_write(tmp_path / "lab.yaml", text))
    assert inv.links["l"].pull("carrier").end == LinkEnd("b", "p0")


def test_tilde_is_the_home_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    text = MINIMAL.replace("{host: a.example}", "{host: a.example, identity_file: ~/.ssh/k}")
    inv = load(_write(tmp_path / "lab.yaml", text))
    assert inv.hosts["a"].ssh.identity_file == str(tmp_path / "home" / ".ssh" / "k")


def test_numbers_in_text_fields_are_kept_as_written(tmp_path: Path) -> None:
    text = MINIMAL.replace("driver: siw}]\n  b", "driver: siw, firmware: 1.20}]\n  b")
    text = text.replace("{host: a.example}", "{host: a.example, connect_timeout: 3}")
    inv = load(_write(tmp_path / "lab.yaml", text))
    assert inv.hosts["a"].rnic("p0").firmware == "1.20"
    assert inv.hosts["a"].ssh.connect_timeout == 3.0


def test_recursive_merge_is_located(tmp_path: Path) -> None:
    text = "hosts:\n  a: &h\n    <<: *h\n    ssh: {host: x}\n"
    with pytest.raises(InventoryError) as caught:
        load(_write(tmp_path / "lab.yaml", text))
    assert (caught.value.line, caught.value.path) == (3, "hosts.a")


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("missing.yaml", None, "cannot read inventory: No such file or directory"),
        ("folder", "dir", "cannot read inventory: Is a directory"),
        ("latin1.yaml", b"hosts: {caf\xe9: 1}\n", "inventory is not UTF-8 text"),
    ],
)
def test_unreadable_file_is_input_error(
    tmp_path: Path, name: str, content: str | bytes | None, message: str
) -> None:
    path = tmp_path / name
    if content == "dir":
        path.mkdir()
    elif isinstance(content, bytes):
        path.write_bytes(content)
    with pytest.raises(InputError) as caught:
        load(path)
    assert not isinstance(caught.value, InventoryError)
    assert str(caught.value).startswith(f"{path}: {message}")


def test_load_from_args(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HIL_INVENTORY", raising=False)
    with pytest.raises(
        InputError, match=r"^no inventory: pass --inventory FILE or set HIL_INVENTORY$"
    ):
        load_from_args(None)
    path = _write(tmp_path / "lab.yaml", MINIMAL)
    assert list(load_from_args(str(path)).links) == ["l"]
    monkeypatch.setenv("HIL_INVENTORY", str(path))
    assert load_from_args(None).path == path


def test_document_loads_back_into_an_equal_inventory(example: Inventory, tmp_path: Path) -> None:
    doc = inventory_document(example)
    assert [p["name"] for p in doc.pop("pairs")] == [
        "t6-pair-1",
        "t5-pair-1",
        "e810-pair-1",
        "siw-pair-1",
    ]
    # JSON is YAML, so the document (without its pairs summary) is an inventory.
    again = load(_write(tmp_path / "again.yaml", json.dumps(doc)))
    assert again.hosts == example.hosts
    assert again.links == example.links


def test_a_pair_offers_the_families_both_ends_have_an_address_of(example: Inventory) -> None:
    t6 = example.pair("t6-pair-1")
    assert t6.rnic_a.address6 == ipaddress.IPv6Interface("2001:db8:1::1/64")
    assert t6.rnic_a.address_of("ipv6") == t6.rnic_a.address6
    assert t6.rnic_a.address_of("ipv4") == ipaddress.ip_interface("198.18.1.1/24")
    assert t6.families == ("ipv4", "ipv6")
    assert example.pair("t5-pair-1").families == ("ipv4",)


def test_an_ipv6_address_alone_offers_ipv6_only(tmp_path: Path) -> None:
    text = MINIMAL.replace("driver: siw", "driver: siw, address: 'fd00::1/64'", 1)
    rnic = load(_write(tmp_path / "lab.yaml", text)).hosts["a"].rnic("p0")
    assert (rnic.families, rnic.address_of("ipv6"), rnic.address_of("ipv4")) == (
        ("ipv6",), ipaddress.ip_interface("fd00::1/64"), None,
    )  # fmt: skip
