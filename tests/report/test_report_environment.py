"""environment.properties, read through real agents on the netns lab's hosts."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from netnslab import NetnsLab

from hil.agent.types import CommandResult
from hil.errors import CommandTimeout
from hil.host.hosts import Hosts
from hil.host.rdmadev import rdma_core_version
from hil.inventory.model import Pair
from hil.report.environment import (
    NONE_REPORTED,
    gather,
    rdma_core_property,
    read_properties,
    write_properties,
)


class Scripted:
    """A stand-in agent answering each command from a table (or raising)."""

    def __init__(self, answers: dict[str, CommandResult | Exception]) -> None:
        self.answers = answers

    def run(self, argv: list[str], timeout: float = 60.0) -> CommandResult:
        got = self.answers[argv[0]]
        if isinstance(got, Exception):
            raise got
        return got


def ok(out: str) -> CommandResult:
    return CommandResult((), 0, out, "")


def test_rdma_core_from_rpm_when_dpkg_has_none() -> None:
    agent = Scripted(
        {"dpkg-query": CommandResult((), 127, "", "dpkg-query: not found"), "rpm": ok("48.0-1.el9")}
    )
    assert rdma_core_version(agent, "lab-a") == "48.0-1.el9"


def test_an_unreadable_value_says_what_failed_where_and_why() -> None:
    agent = Scripted(
        {
            "dpkg-query": CommandTimeout("lab-a", "dpkg-query did not finish"),
            "rpm": CommandResult((), 127, "", "rpm: command not found"),
        }
    )
    value = rdma_core_property(agent, "lab-a")
    assert value.startswith("unknown: rdma-core version failed on lab-a: ")
    assert "dpkg-query did not finish" in value and "rpm: command not found" in value


def test_properties_are_escaped_for_java(tmp_path: Path) -> None:
    path = write_properties(tmp_path, {"b": "x=1: y\nz", "a": "c:\\d"})
    assert path.read_text() == "a=c\\:\\\\d\nb=x\\=1\\: y\\nz\n"
    write_properties(tmp_path, {"metric.x": "1 ms"}, where="end")
    assert path.read_text().endswith("b=x\\=1\\: y\\nz\nmetric.x=1 ms\n")
    write_properties(tmp_path, {"flaky": "none"}, where="top")
    assert path.read_text().startswith("flaky=none\na=c")


def test_properties_read_back_as_written_the_last_of_a_key_winning(tmp_path: Path) -> None:
    props = {"b": "x=1: y\nz", "a": "c:\\d", "t6-a.iw_cxgb4.ep_timeout_secs": "10"}
    path = write_properties(tmp_path, props)
    write_properties(tmp_path, {"a": "later"}, where="end")
    assert read_properties(path) == {**props, "a": "later"}
    assert read_properties(tmp_path / "none.properties") == {}


def _pair(netns_lab: NetnsLab) -> Pair:
    inventory = netns_lab.inventory()
    return inventory.pair(next(iter(inventory.links)))


def test_gathered_from_both_hosts_of_the_pair(netns_lab: NetnsLab) -> None:
    pair = _pair(netns_lab)
    with Hosts(netns_lab.inventory()) as hosts:
        props = gather(hosts, pair)
    assert props["pair"] == pair.name
    assert props["host.a"].startswith(f"{pair.host_a.name} (")
    assert props["pull.modes"] == "admin,blackhole"
    for host in (pair.host_a.name, pair.host_b.name):
        # The namespaces share this machine's kernel and packages.
        assert props[f"{host}.kernel"] == os.uname().release
        # What the kernel says of the port (SIOCETHTOOL through the agent, no ethtool),
        # not the inventory's "siw".
        assert props[f"{host}.data0.driver"] == "veth"
        assert props[f"{host}.data0.driver_version"] == "1.0"
        assert props[f"{host}.data0.firmware"] == NONE_REPORTED
        assert props[f"{host}.data0.inventory"] == (
            "driver siw, rdma_device -, fallback siw, firmware -"
        )
        # No siw device is set up here; a kernel without RDMA netlink says why it cannot tell.
        rdma = props[f"{host}.data0.rdma_device"]
        assert rdma == "none on data0" or rdma.startswith(
            f"unknown: rdma link show failed on {host}: "
        ), rdma
        assert props[f"{host}.rdma-core"]  # a version, or unknown with the reason


def test_a_port_that_cannot_be_read_is_unknown_never_the_inventorys_claim(
    netns_lab: NetnsLab,
) -> None:
    pair = _pair(netns_lab)
    # The inventory claims a Chelsio port whose netdev the host does not have.
    absent = dataclasses.replace(
        pair.rnic_a, netdev="absent0", driver="iw_cxgb4", firmware="1.27.4.0"
    )
    rnics = tuple(absent if r.name == absent.name else r for r in pair.host_a.rnics)
    pair = dataclasses.replace(pair, host_a=dataclasses.replace(pair.host_a, rnics=rnics))
    with Hosts(netns_lab.inventory()) as hosts:
        props = gather(hosts, pair)
    host = pair.host_a.name
    why = (
        f"unknown: SIOCETHTOOL failed on {host}: SIOCETHTOOL (ETHTOOL_GDRVINFO) on absent0: "
        "No such device (ENODEV)"
    )
    for key in ("driver", "driver_version", "firmware"):
        assert props[f"{host}.absent0.{key}"].startswith(why)
    assert props[f"{host}.absent0.inventory"] == (
        "driver iw_cxgb4, rdma_device -, fallback siw, firmware 1.27.4.0"
    )
    assert props[f"{pair.host_b.name}.data0.driver"] == "veth"  # the other host is unaffected


def test_a_host_without_an_agent_has_every_value_unknown(netns_lab: NetnsLab) -> None:
    pair = _pair(netns_lab)

    class NoAgent:
        def agent(self, name: str) -> object:
            raise CommandTimeout(name, "SSH connect did not finish within 5s")

    props = gather(NoAgent(), pair)  # type: ignore[arg-type]
    host = pair.host_a.name
    value = f"unknown: starting the agent failed on {host}: SSH connect did not finish within 5s"
    for key in ("kernel", "rdma-core", "data0.driver", "data0.firmware", "data0.rdma_device"):
        assert props[f"{host}.{key}"] == value
    assert props[f"{host}.data0.inventory"].startswith("driver siw")


def test_the_recorded_t6_pair_shows_what_its_cards_run(tmp_path: Path) -> None:
    from fake_hosts import t6_hosts, t6_inventory

    inventory = t6_inventory()
    props = gather(t6_hosts(tmp_path, inventory), inventory.pair("t6"))
    assert props["t6a.enp129s0f4.driver"] == "cxgb4"
    assert props["t6a.enp129s0f4.firmware"] == "1.27.4.0, TP 0.1.23.2"
    assert props["t6b.iw_cxgb4.ep_timeout_secs"] == "60"
    assert not props["t6b.rdma-core"].startswith("unknown")
