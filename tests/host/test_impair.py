"""Impairments on a link's path, offline: a real journal in a real SQLite store, fake hosts
at the agent boundary whose ``tc`` keeps each netdev's netem and whose ``ping`` answers as
a path with that netem would (or, ``effective=False``, as one it never reaches: an
offloading RNIC's)."""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

import pytest
from fake_hosts import FakeAgent, FakeHosts, FakeLink
from impair_inventory import COMMAND, MIDDLEBOX, impair_inventory

from hil.errors import InputError
from hil.host.impair import (
    Direction,
    ImpairControl,
    ImpairmentNotEffective,
    mpa_drop_script,
    mss_script,
    offloads_on,
)
from hil.host.impairkinds import Impairment
from hil.host.journal import Journal, replay
from hil.inventory import load
from hil.inventory.model import Inventory
from hil.reservation import Store

ETHTOOL_K = """\
Features for enp1s0:
rx-checksumming: on
tcp-segmentation-offload: on
generic-segmentation-offload: on
generic-receive-offload: on
large-receive-offload: off [fixed]
"""


class PathAgent(FakeAgent):
    """A host whose tc keeps a netem per netdev and whose ping sees the path's netem."""

    def __init__(self, host: str, links: dict[str, FakeLink], path: Path_) -> None:
        super().__init__(host, links)
        self.path = path
        self.ran: list[list[str]] = []

    def _op_run(self, argv: list[str], input: str | None = None) -> dict[str, Any]:
        self.ran.append(argv)
        self.path.journaled.append(len(self.path.store.journal_entries(self.host)))
        match argv:
            case ["tc", "-j", "qdisc", "show", "dev", netdev, "root"]:
                kind = "netem" if netdev in self.path.netem.get(self.host, {}) else "noqueue"
                return _ok(f'[{{"kind":"{kind}","handle":"0:","root":true}}]')
            case ["tc", "qdisc", "add", "dev", netdev, "root", "netem", *words]:
                self.path.netem.setdefault(self.host, {})[netdev] = words
                return _ok()
            case ["tc", "qdisc", "del", "dev", netdev, "root"]:
                self.path.netem.get(self.host, {}).pop(netdev, None)
                return _ok()
            case ["ethtool", "-k", _]:
                return _ok(ETHTOOL_K)
            case ["ping", *args]:
                return _ok(self.path.ping(int(args[args.index("-c") + 1])))
            case ["nft", "list", "table", "netdev", table]:
                held = table in self.path.nft.get(self.host, {})
                return _ok() if held else {"status": 1, "stdout": "", "stderr": "No such file"}
            case ["nft", "-f", "-"]:
                table = (input or "").split()[2]
                self.path.nft.setdefault(self.host, {})[table] = input or ""
                return _ok()
            case ["nft", "delete", "table", "netdev", table]:
                self.path.nft.get(self.host, {}).pop(table, None)
                return _ok()
        return _ok()


class Path_:
    """The lab's path: every netem anywhere applies to the ping probes (one direction
    is probed at a time), unless ``effective`` is False."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.netem: dict[str, dict[str, list[str]]] = {}
        self.nft: dict[str, dict[str, str]] = {}  # host -> table -> its nft -f script
        self.effective = True
        self.journaled: list[int] = []  # journal entries of the host at each command

    def ping(self, count: int) -> str:
        words = [w for d in self.netem.values() for ws in d.values() for w in ws]
        lost = dup = 0
        if self.effective and "loss" in words:
            lost = math.ceil(count * float(words[words.index("loss") + 1].rstrip("%")) / 100)
        if self.effective and "duplicate" in words:
            dup = math.ceil(count * float(words[words.index("duplicate") + 1].rstrip("%")) / 100)
        delay = float(words[words.index("delay") + 1][:-2]) if "delay" in words else 0.0
        rtt = (delay if self.effective else 0.0) + 0.4
        lines = [f"64 bytes from x: icmp_seq={i} ttl=64 time={rtt:.2f} ms" for i in range(count)]
        dups = f", +{dup} duplicates" if dup else ""
        lines.append(f"{count} packets transmitted, {count - lost} received{dups}, 0% loss")
        return "\n".join(lines) + "\n"


def _ok(stdout: str = "") -> dict[str, Any]:
    return {"status": 0, "stdout": stdout, "stderr": ""}


class Session:
    """A controller's SSH session: records what it ran; ``impairctl set`` impairs the path."""

    def __init__(self, path: Path_) -> None:
        self.path = path
        self.ran: list[list[str]] = []

    def run(self, argv: list[str], timeout: float = 0, check: bool = False) -> None:
        self.ran.append(list(argv))
        tool = self.path.netem.setdefault("ctl", {})
        if argv[:2] == ["impairctl", "set"]:
            tool[argv[3]] = argv[4].split()
        elif argv[:2] == ["impairctl", "clear"]:
            tool.pop(argv[3], None)


class Hosts(FakeHosts):
    """FakeHosts with one SSH session per host."""

    def __init__(self, inventory: Inventory, store: Store, path: Path_) -> None:
        agents: dict[str, FakeAgent] = {
            name: PathAgent(name, {"eth1": FakeLink(up=True), "enp1s0": FakeLink(up=True)}, path)
            for name in inventory.hosts
        }
        super().__init__(inventory, store, agents)
        self.sessions = {name: Session(path) for name in inventory.hosts}

    def session(self, name: str) -> Session:
        return self.sessions[name]


def _setup(tmp_path: Path, store: Store, impair: str = "", driver: str = "siw") -> Any:
    inv = impair_inventory(tmp_path, driver, impair)
    path = Path_(store)
    hosts = Hosts(inv, store, path)
    journal = Journal(hosts, store, "run-1")  # type: ignore[arg-type]
    return inv.link("ab"), hosts, journal, path, ImpairControl(hosts, journal)  # type: ignore[arg-type]


LOSS = Impairment("loss", percent=10)


def test_host_netem_impairs_the_senders_port_journaled_first_and_goes_with_the_block(
    tmp_path: Path, store: Store
) -> None:
    link, hosts, journal, path, ctl = _setup(tmp_path, store)
    with ctl.impaired(link, "b>a", [LOSS, Impairment("delay", delay_ms=20, jitter_ms=5)]) as got:
        assert path.netem == {"b": {"eth1": ["loss", "10%", "delay", "20ms", "5ms"]}}
        assert [e.entry["direction"] for e in ctl.entries(link)] == ["b>a"]
        assert got[0].lost == 20 and min(got[1].rtts_ms) >= 20
    add = next(i for i, a in enumerate(hosts.agents["b"].ran) if a[:3] == ["tc", "qdisc", "add"])
    assert path.journaled[add] == 1, "the undo was not journaled before tc added the netem"
    assert path.netem == {"b": {}}
    assert not ctl.entries(link)


def test_an_impairment_the_path_does_not_show_fails_not_effective_and_is_undone(
    tmp_path: Path, store: Store
) -> None:
    link, _, _, path, ctl = _setup(tmp_path, store)
    path.effective = False
    with (
        pytest.raises(
            ImpairmentNotEffective,
            match=r"impairment not effective on ab a>b \(netem\): loss \(loss 10%\): lost 0 "
            r"of 200 probes, expected about 20",
        ),
        ctl.impaired(link, "a>b", [LOSS]),
    ):
        pass
    assert path.netem == {"a": {}}
    assert not ctl.entries(link)


def test_a_killed_runs_impairment_is_undone_by_the_next_replay(
    tmp_path: Path, store: Store
) -> None:
    link, hosts, _, path, ctl = _setup(tmp_path, store)
    ctl.apply(link, "a>b", [LOSS])  # the run dies here: no block ends, no teardown
    replay(hosts, load(tmp_path / "lab.yaml").pair("ab"), store).check("replay")
    assert path.netem == {"a": {}}
    assert not ctl.entries(link)


def test_a_direction_impaired_twice_is_refused(tmp_path: Path, store: Store) -> None:
    link, _, _, _, ctl = _setup(tmp_path, store)
    ctl.apply(link, "a>b", [LOSS])
    with pytest.raises(InputError, match="link ab a>b is impaired already"):
        ctl.apply(link, "a>b", [Impairment("corrupt", percent=1)])


def test_a_link_without_an_impairment_point_is_refused(tmp_path: Path, store: Store) -> None:
    link, _, _, _, ctl = _setup(tmp_path, store, driver="iw_cxgb4")
    with pytest.raises(InputError, match="link ab has no impairment point"):
        ctl.apply(link, "a>b", [LOSS])


def test_a_middlebox_impairs_its_netdev_toward_the_receiver_with_offloads_off(
    tmp_path: Path, store: Store
) -> None:
    link, hosts, journal, path, ctl = _setup(tmp_path, store, MIDDLEBOX, driver="iw_cxgb4")
    with ctl.impaired(link, "a>b", [LOSS]):
        assert path.netem == {"mb": {"enp2s0": ["loss", "10%"]}}
    ran = hosts.agents["mb"].ran
    assert ["ethtool", "-K", "enp1s0", "gro", "off", "gso", "off", "tso", "off"] in ran
    journal.close().check("teardown")
    assert ran[-1] == ["ethtool", "-K", "enp1s0", "gro", "on", "gso", "on", "tso", "on"]


def test_offloads_fixed_or_off_are_left_alone() -> None:
    assert offloads_on(ETHTOOL_K) == ["gro", "gso", "tso"]


def test_a_command_impairment_runs_apply_then_clear_on_its_controller(
    tmp_path: Path, store: Store
) -> None:
    link, hosts, _, _, ctl = _setup(tmp_path, store, COMMAND, driver="irdma")
    with ctl.impaired(link, "b>a", [LOSS]):
        pass
    assert hosts.sessions["ctl"].ran == [
        ["impairctl", "set", "Eth1/3", "b:p0>a:p0", "loss 10%"],
        ["impairctl", "clear", "Eth1/3", "b:p0>a:p0"],
    ]


def test_flapping_takes_the_senders_port_down_and_leaves_it_up(
    tmp_path: Path, store: Store
) -> None:
    link, hosts, _, _, ctl = _setup(tmp_path, store)
    flap = Impairment("flap", every_s=0.1, down_s=0.03)
    down = ("set_link", {"netdev": "eth1", "up": False, "mtu": None})
    agent: FakeAgent = hosts.agents["a"]

    def downs() -> int:
        return agent.calls.count(down)

    with ctl.impaired(link, "a>b", [flap]):
        # Until the flapper's thread has flapped twice (in a fixed 0.35 s it may not have,
        # on a loaded machine).
        deadline = time.monotonic() + 5
        while downs() < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
    assert downs() >= 2
    assert hosts.agents["a"].links["eth1"].up
    assert not ctl.entries(link)


def test_a_flap_that_never_went_down_is_not_effective(tmp_path: Path, store: Store) -> None:
    link, _, _, _, ctl = _setup(tmp_path, store)
    with (
        pytest.raises(ImpairmentNotEffective, match="took eth1 on a down 0 times"),
        ctl.impaired(link, "a>b", [Impairment("flap", every_s=5, down_s=1)]),
    ):
        pass


def _macs(hosts: Hosts) -> None:
    """Each host's ports get a MAC (52:54:00:00:00:0a on a, ...0b on b)."""
    for host, mac in (("a", "52:54:00:00:00:0a"), ("b", "52:54:00:00:00:0b")):
        for netdev in ("eth1", "enp1s0"):
            hosts.agents[host].links[netdev].mac = mac


def test_probes_wait_for_replies_the_delay_holds_back(tmp_path: Path, store: Store) -> None:
    link, hosts, _, _, ctl = _setup(tmp_path, store)
    _macs(hosts)
    with ctl.impaired(link, "a>b", [Impairment("delay", delay_ms=4500, jitter_ms=500)]):
        pass
    ping = next(a for a in hosts.agents["a"].ran if a[0] == "ping")
    assert ping[ping.index("-W") + 1] == "7"  # ping's own 2 s, and the 5 s held back


def test_a_killed_runs_middlebox_impairment_is_undone_by_the_next_replay(
    tmp_path: Path, store: Store
) -> None:
    link, hosts, _, path, ctl = _setup(tmp_path, store, MIDDLEBOX, driver="iw_cxgb4")
    ctl.apply(link, "a>b", [LOSS])  # the run dies here: netem and offloads left on mb
    other = store.journal_add("mb", "another run", {"what": "x", "impair": "other"})
    replay(hosts, load(tmp_path / "lab.yaml").pair("ab"), store).check("replay")
    assert path.netem == {"mb": {}}
    assert hosts.agents["mb"].ran[-1][:3] == ["ethtool", "-K", "enp1s0"]  # offloads back on
    assert [e.id for e in store.journal_entries("mb")] == [other]


def test_a_delay_of_a_second_or_more_pins_both_ends_neighbours_until_the_block_ends(
    tmp_path: Path, store: Store
) -> None:
    """Unconfirmed, a neighbour entry fails after 5 s + 3 probes 1 s apart (arp.c arp_tbl,
    6.1.192): a delay of the probes' replies past that would lose the peer's MAC."""
    link, hosts, _, _, ctl = _setup(tmp_path, store)
    _macs(hosts)
    with ctl.impaired(link, "b>a", [Impairment("delay", delay_ms=12_000)]):
        pins = {
            h: [a for a in hosts.agents[h].ran if a[:3] == ["ip", "neigh", "replace"]] for h in "ab"
        }
        assert [p[p.index("lladdr") + 1] for p in pins["a"]] == ["52:54:00:00:00:0b"]
        assert [p[p.index("lladdr") + 1] for p in pins["b"]] == ["52:54:00:00:00:0a"]
        assert all(p[-2:] == ["nud", "permanent"] for p in pins["a"] + pins["b"])
    for h in "ab":
        assert any(a[:3] == ["ip", "neigh", "del"] for a in hosts.agents[h].ran)


def test_a_short_delay_pins_no_neighbour(tmp_path: Path, store: Store) -> None:
    link, hosts, _, _, ctl = _setup(tmp_path, store)
    with ctl.impaired(link, "a>b", [Impairment("delay", delay_ms=20)]):
        pass
    assert not any(a[:2] == ["ip", "neigh"] for h in "ab" for a in hosts.agents[h].ran)


MSS = Impairment("mss", mss=536)


def test_an_mss_clamp_is_an_nft_table_on_the_middlebox_netdev_toward_the_receiver(
    tmp_path: Path, store: Store
) -> None:
    """a>b: the SYN-ACK b sends enters the middlebox on its netdev toward b (enp2s0)."""
    link, hosts, journal, path, ctl = _setup(tmp_path, store, MIDDLEBOX, driver="iw_cxgb4")
    with ctl.impaired(link, "a>b", [MSS]) as probes:
        assert path.nft == {"mb": {"hil_mss_enp2s0": mss_script("enp2s0", 536)}}
        assert path.netem == {}, "an MSS clamp alone puts no netem anywhere"
        assert probes == []  # proven on the wire (hil.wire.mss_rules)
    ran = hosts.agents["mb"].ran  # every command of this test ran on mb: indices agree
    load = ran.index(["nft", "-f", "-"])
    assert ran[load - 1][:2] == ["nft", "list"]
    assert path.journaled[load] == path.journaled[load - 1] + 1, (
        "the table's removal was not journaled before nft -f"
    )
    assert ["ethtool", "-K", "enp1s0", "gro", "off", "gso", "off", "tso", "off"] in ran
    assert path.nft == {"mb": {}}
    assert not ctl.entries(link)
    journal.close().check("teardown")


def test_the_mss_script_rewrites_only_larger_mss_options_of_syns_entering_the_netdev() -> None:
    assert mss_script('en"p2s0', 536) == (
        "table netdev hil_mss_en_p2s0 {\n"
        '  chain in { type filter hook ingress device "enp2s0" priority -450;\n'
        "    tcp flags & syn == syn tcp option maxseg size > 536 "
        "tcp option maxseg size set 536; }\n"
        "}\n"
    )


@pytest.mark.parametrize(
    ("imp", "way", "table"),
    [
        (Impairment("mss", mss=536), "b>a", "hil_mss_enp1s0"),  # the SYN-ACK from a
        (Impairment("drop-mpa-request"), "a>b", "hil_mpadrop_enp1s0"),  # the request from a
    ],
)
def test_a_killed_runs_nft_table_on_the_middlebox_is_removed_by_the_next_replay(
    tmp_path: Path, store: Store, imp: Impairment, way: Direction, table: str
) -> None:
    """Both tables sit on the middlebox's netdev toward a (enp1s0)."""
    link, hosts, _, path, ctl = _setup(tmp_path, store, MIDDLEBOX, driver="iw_cxgb4")
    ctl.apply(link, way, [imp])  # the run dies here: the table left on mb
    assert list(path.nft["mb"]) == [table]
    replay(hosts, load(tmp_path / "lab.yaml").pair("ab"), store).check("replay")
    assert path.nft == {"mb": {}}
    assert not ctl.entries(link)


def test_an_mss_table_hil_did_not_journal_is_refused_and_left_alone(
    tmp_path: Path, store: Store
) -> None:
    link, _, _, path, ctl = _setup(tmp_path, store, MIDDLEBOX, driver="iw_cxgb4")
    path.nft["mb"] = {"hil_mss_enp2s0": "someone's"}
    with pytest.raises(InputError, match="has an nftables table hil_mss_enp2s0 hil did not"):
        ctl.apply(link, "a>b", [MSS])
    assert path.nft["mb"] == {"hil_mss_enp2s0": "someone's"}


def test_an_mss_clamp_on_host_netem_is_refused_naming_the_middlebox(
    tmp_path: Path, store: Store
) -> None:
    link, _, _, path, ctl = _setup(tmp_path, store)
    with pytest.raises(InputError, match=r"an MSS clamp needs a middlebox .* not netem"):
        ctl.apply(link, "a>b", [MSS])
    assert not ctl.entries(link) and path.nft == {}


DROP = Impairment("drop-mpa-request")


def test_an_mpa_request_drop_is_an_nft_table_on_the_receivers_own_port_journaled_first(
    tmp_path: Path, store: Store
) -> None:
    """a>b on host netem: the request is dropped entering b's own port (eth1)."""
    link, hosts, journal, path, ctl = _setup(tmp_path, store)
    with ctl.impaired(link, "a>b", [DROP]) as probes:
        assert path.nft == {"b": {"hil_mpadrop_eth1": mpa_drop_script("eth1")}}
        assert path.netem == {} and probes == []  # proven on the wire (mpadrop_rules)
    ran = hosts.agents["b"].ran
    load = ran.index(["nft", "-f", "-"])
    assert path.journaled[load] == path.journaled[load - 1] + 1, (
        "the table's removal was not journaled before nft -f"
    )
    assert path.nft == {"b": {}}
    assert not ctl.entries(link)
    journal.close().check("teardown")


def test_an_mpa_request_drop_on_a_command_link_is_refused(tmp_path: Path, store: Store) -> None:
    link, _, _, path, ctl = _setup(tmp_path, store, COMMAND, driver="iw_cxgb4")
    with pytest.raises(InputError, match="dropping the MPA request needs nftables"):
        ctl.apply(link, "a>b", [DROP])
    assert not ctl.entries(link) and path.nft == {}


def test_the_mpa_drop_script_drops_the_first_segment_opening_with_the_request_key() -> None:
    key = "meta l4proto tcp @ih,0,128 0x4d504120494420526571204672616d65"
    assert mpa_drop_script("eth1") == (
        "table netdev hil_mpadrop_eth1 {\n"
        "  set dropped { type inet_proto; flags dynamic; }\n"
        '  chain in { type filter hook ingress device "eth1" priority -450;\n'
        f"    {key} meta l4proto @dropped accept;\n"
        f"    {key} add @dropped {{ meta l4proto }} counter drop; }}\n"
        "}\n"
    )
