"""Where run_scenario runs the peer (hil/peer/run.py): the link's ``peer:`` entry for the
DUT's host and its source, else the pair's other host from its port's address; a host
outside the pair refused.  The agents are fakes (tests/cm/fake_cm.py) that answer
``peer_run`` with an empty record; the run itself is the lab's (test_wire_conformance)."""

from __future__ import annotations

import ipaddress
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cm"))  # fake_cm, beside its tests
# ci/lint's mypy of tests/peer has tests/cm off its path: the fakes are Any here.
from fake_cm import ADDRS, FakeAgent, FakeCMWorld  # type: ignore[import-not-found]  # noqa: E402

from hil.cm.clock import controller_us  # noqa: E402
from hil.cm.session import CMSession  # noqa: E402
from hil.errors import InputError  # noqa: E402
from hil.inventory.model import Host, PeerSpec, SshConfig  # noqa: E402
from hil.judge.profiles import SIW  # noqa: E402
from hil.judge.timeline import RAW_TCP  # noqa: E402
from hil.peer import run  # noqa: E402
from hil.peer.scenario import Scenario  # noqa: E402

SOURCE = "198.18.9.2"  # another address of h1, not its RNIC's (a Chelsio DUT's other host)


@pytest.fixture
def peer_runs(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, dict[str, Any]]]:
    """Each ``peer_run`` call as (host, params); the DUT's cm events not waited for."""
    calls: list[tuple[str, dict[str, Any]]] = []

    def peer_run(self: FakeAgent, **params: Any) -> dict[str, Any]:
        calls.append((self.name, params))
        none = {"stopped_at": None, "unmet": None, "error": None}
        return {"session": 1, "local": "", "remote": "", "record": [], **none}

    monkeypatch.setattr(FakeAgent, "peer_run", peer_run, raising=False)
    monkeypatch.setattr(run, "PROMPT_S", 0.01)
    return calls


def _session(*peers: PeerSpec, third: Host | None = None) -> CMSession:
    world = FakeCMWorld()
    hosts = {"h0": world.pair.host_a, "h1": world.pair.host_b}
    if third is not None:
        hosts[third.name] = third
    link = replace(world.pair.link, peers=peers)
    pair = replace(world.pair, link=link, peer_hosts=tuple(hosts[p.host] for p in peers))
    return CMSession(world, pair, profile=SIW)


def _scenario(role: str) -> Scenario:
    return Scenario(f"{role}-nothing", role, "mpa_rev2", ())  # type: ignore[arg-type]


def test_by_default_the_peer_is_the_other_host_from_its_ports_address(
    peer_runs: list[tuple[str, dict[str, Any]]],
) -> None:
    ran = run.run_scenario(_session(), "a", _scenario("active"))
    [(host, params)] = peer_runs
    assert (ran.dut, ran.peer, host) == ("h0", "h1", "h1")
    assert (params["address"], params["src"]) == (ADDRS["h0"], ADDRS["h1"])


def test_an_active_peer_connects_from_the_entrys_source(
    peer_runs: list[tuple[str, dict[str, Any]]],
) -> None:
    cm = _session(PeerSpec("h1", ipaddress.ip_address(SOURCE)))
    run.run_scenario(cm, "a", _scenario("active"))
    [(host, params)] = peer_runs
    assert (host, params["address"], params["src"]) == ("h1", ADDRS["h0"], SOURCE)


def test_a_passive_peer_listens_on_the_entrys_source(
    peer_runs: list[tuple[str, dict[str, Any]]],
) -> None:
    cm = _session(PeerSpec("h1", ipaddress.ip_address(SOURCE)))
    run.run_scenario(cm, "a", _scenario("passive"))
    [(host, params)] = peer_runs
    assert (host, params["address"], params["src"]) == ("h1", SOURCE, None)


def test_an_entry_of_the_duts_own_host_serves_only_against_the_other_end(
    peer_runs: list[tuple[str, dict[str, Any]]],
) -> None:
    cm = _session(PeerSpec("h0", ipaddress.ip_address("198.18.9.1")))
    run.run_scenario(cm, "a", _scenario("active"))  # h0 is the DUT: the default peer, h1
    run.run_scenario(cm, "b", _scenario("active"))  # h1 the DUT: h0 from its source
    assert [(h, p["src"]) for h, p in peer_runs] == [("h1", ADDRS["h1"]), ("h0", "198.18.9.1")]


def test_a_peer_host_outside_the_pair_is_refused_naming_the_entry(
    peer_runs: list[tuple[str, dict[str, Any]]],
) -> None:
    plain = Host("plain-1", SshConfig(host="127.0.0.1"))
    cm = _session(PeerSpec("plain-1"), third=plain)
    with pytest.raises(InputError) as e:
        run.run_scenario(cm, "a", _scenario("active"))
    assert str(e.value).startswith(
        "link l01's peer: names host plain-1 to run the reference peer against h0: "
        "a peer host outside the pair is not supported yet"
    )
    assert "{host: h1, source: ADDRESS}" in str(e.value)
    assert not peer_runs  # refused before any agent ran the peer


def test_the_peers_connection_is_left_to_the_peer_verdict_from_before_its_syn(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The wire judge leaves out a connection that began within the RAW_TCP action's span;
    # the SYN precedes the peer's first frame, so the span starts before the peer's run.
    called_us: list[int] = []

    def peer_run(self: FakeAgent, **params: Any) -> dict[str, Any]:
        called_us.append(controller_us())
        frame = {"dir": "tx", "frame": "mpa_request", "fields": {}, "raw": ""}
        record = [{**frame, "t_ns": 5_000_000}, {**frame, "t_ns": 9_000_000}]
        none = {"stopped_at": None, "unmet": None, "error": None}
        ends = {"local": f"{ADDRS['h1']}:40000", "remote": f"{ADDRS['h0']}:7000"}
        return {"session": 1, **ends, "record": record, **none}

    monkeypatch.setattr(FakeAgent, "peer_run", peer_run, raising=False)
    monkeypatch.setattr(run, "PROMPT_S", 0.01)
    cm = _session()
    ran = run.run_scenario(cm, "a", _scenario("active"))
    [raw] = [a for a in ran.timeline.actions if a.name == RAW_TCP]
    assert raw.t_us <= called_us[0]
    assert raw.end_us >= cm.offset("b").offset_us + 9_000
