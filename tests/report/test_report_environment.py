"""environment.properties, read through real agents on the netns lab's hosts."""

from __future__ import annotations

import os
from pathlib import Path

from hil.agent.types import CommandResult
from hil.errors import CommandTimeout
from hil.hosts import Hosts
from hil.report.environment import gather, parse_ethtool, rdma_core_version, write_properties
from hil.testing import NetnsLab

ETHTOOL = """driver: cxgb4
version: 6.1.0-27-amd64
firmware-version: 1.27.4.0, TP 0.1.23.2
expansion-rom-version:
bus-info: 0000:3b:00.4
"""


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


def test_ethtool_output_is_parsed() -> None:
    info = parse_ethtool(ETHTOOL)
    assert info["driver"] == "cxgb4"
    assert info["firmware-version"] == "1.27.4.0, TP 0.1.23.2"
    assert info["expansion-rom-version"] == ""


def test_rdma_core_from_rpm_when_dpkg_has_none() -> None:
    agent = Scripted({"dpkg-query": CommandResult((), 127, "", "dpkg-query: not found"),
                      "rpm": ok("48.0-1.el9")})
    assert rdma_core_version(agent) == "48.0-1.el9"


def test_an_unreadable_value_says_why() -> None:
    agent = Scripted({"dpkg-query": CommandTimeout("lab-a", "dpkg-query did not finish"),
                      "rpm": CommandResult((), 127, "", "rpm: command not found")})
    assert rdma_core_version(agent) == "unknown (lab-a: dpkg-query did not finish)"


def test_properties_are_escaped_for_java(tmp_path: Path) -> None:
    path = write_properties(tmp_path, {"b": "x=1: y\nz", "a": "c:\\d"})
    assert path.read_text() == "a=c\\:\\\\d\nb=x\\=1\\: y\\nz\n"
    write_properties(tmp_path, {"metric.x": "1 ms"}, append=True)
    assert path.read_text().endswith("metric.x=1 ms\n")


def test_gathered_from_both_hosts_of_the_pair(netns_lab: NetnsLab) -> None:
    inventory = netns_lab.inventory()
    pair = inventory.pair(next(iter(inventory.links)))
    with Hosts(inventory) as hosts:
        props = gather(hosts, pair)
    assert props["pair"] == pair.name
    assert props["host.a"].startswith(f"{pair.host_a.name} (")
    assert props["pull.modes"] == "admin,blackhole"
    for host in (pair.host_a.name, pair.host_b.name):
        # The namespaces share this machine's kernel and packages.
        assert props[f"{host}.kernel"] == os.uname().release
        assert props[f"{host}.data0.driver"] == "veth"
        assert props[f"{host}.data0.rdma_device"] == "siw fallback on data0"
        assert props[f"{host}.rdma-core"]  # a version, or unknown with the reason
