"""devlink parameters on the recorded E810 pair (tests/data/e810): a host planted in RoCEv2
mode pinned to iWARP (RoCE off first, as ice demands), each change journaled before it is
made, read back, and restored at teardown and by the replay after a run that died."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fake_hosts import FakeHosts, RecordedAgent, e810_hosts

from hil.errors import RemoteError
from hil.host.devlinkparams import pin_devlink, read_devlink
from hil.host.journal import Journal, replay
from hil.inventory.model import Pair, PinnedDevlink
from hil.reservation import Store

PF = "pci/0000:17:00.0"
PARAM_SHOW = "devlink -j dev param show"
IWARP = (PinnedDevlink("enable_iwarp", "true"), PinnedDevlink("enable_roce", "false"))


def _pair(tmp_path: Path, store: Store) -> tuple[FakeHosts, Pair]:
    hosts = e810_hosts(tmp_path / "hosts")
    hosts.store = store
    return hosts, hosts.inventory.pair("e810")


def _journal(hosts: FakeHosts, store: Store, lease: str = "lease-1") -> Journal:
    return Journal(hosts, store, lease)  # type: ignore[arg-type]


def _roce(agent: RecordedAgent) -> None:
    """Plant RoCEv2 mode, as ice starts every port (ice_idc.c ice_init_rdma)."""
    doc = json.loads(agent.run(PARAM_SHOW.split()).stdout)
    for p in doc["param"][PF]:
        if p["name"] in ("enable_roce", "enable_iwarp"):
            p["values"][0]["value"] = p["name"] == "enable_roce"
    agent.record(PARAM_SHOW, json.dumps(doc))
    agent.write("/sys/class/infiniband/irdma0/node_type", "1: CA\n")


def _values(hosts: FakeHosts, host: str) -> dict[str, str]:
    return {n: v for n, (v, _) in read_devlink(hosts.agent(host), host, PF).items()}


def _sets(hosts: FakeHosts, host: str) -> list[list[str]]:
    runs = [p["argv"] for m, p in hosts.agent(host).calls if m == "run"]
    return [argv for argv in runs if argv[1:4] == ["dev", "param", "set"]]


def test_read_devlink_reads_the_functions_parameters(tmp_path: Path, store: Store) -> None:
    hosts, _ = _pair(tmp_path, store)
    found = read_devlink(hosts.agent("e810a"), "e810a", PF)
    assert found["enable_iwarp"] == ("true", "runtime")
    assert found["tx_scheduling_layers"] == ("9", "permanent")
    assert found["local_forwarding"] == ("enabled", "runtime")


def test_a_function_without_parameters_is_named_with_its_host(tmp_path: Path, store: Store) -> None:
    hosts, _ = _pair(tmp_path, store)
    with pytest.raises(RemoteError, match=r"^e810b: devlink shows no parameters of pci/0000:99"):
        read_devlink(hosts.agent("e810b"), "e810b", "pci/0000:99:00.0")


def test_a_roce_host_is_switched_to_iwarp_roce_off_first(tmp_path: Path, store: Store) -> None:
    hosts, pair = _pair(tmp_path, store)
    _roce(hosts.recorded("e810b"))
    pinned = pin_devlink(hosts, pair, IWARP, _journal(hosts, store))  # type: ignore[arg-type]
    expected = {"devlink.enable_roce": "false", "devlink.enable_iwarp": "true"}
    assert pinned == {"e810a": expected, "e810b": expected}
    assert _sets(hosts, "e810a") == []  # already iWARP: nothing changed, nothing journaled
    assert store.journal_entries("e810a") == []
    assert [argv[6:] for argv in _sets(hosts, "e810b")] == [
        ["enable_roce", "value", "false", "cmode", "runtime"],
        ["enable_iwarp", "value", "true", "cmode", "runtime"],
    ]
    assert _sets(hosts, "e810b")[0][:6] == ["devlink", "dev", "param", "set", PF, "name"]
    node_type = hosts.recorded("e810b").file("/sys/class/infiniband/irdma0/node_type")
    assert node_type.read_text() == "4: RNIC\n"


def test_each_change_is_journaled_before_it_is_made(
    tmp_path: Path, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    hosts, pair = _pair(tmp_path, store)
    agent = hosts.recorded("e810b")
    _roce(agent)
    real = agent._devlink_set
    journaled_at_set: list[int] = []

    def devlink_set(*args: str) -> dict[str, Any]:
        journaled_at_set.append(len(store.journal_entries("e810b")))
        return real(*args)

    monkeypatch.setattr(agent, "_devlink_set", devlink_set)
    pin_devlink(hosts, pair, IWARP, _journal(hosts, store))  # type: ignore[arg-type]
    assert journaled_at_set == [1, 2]
    entries = [e.entry for e in store.journal_entries("e810b")]
    assert [e["what"] for e in entries] == [
        f"restore devlink parameter enable_roce=true on {PF}",
        f"restore devlink parameter enable_iwarp=false on {PF}",
    ]
    assert entries[0]["params"]["argv"][-4:] == ["value", "true", "cmode", "runtime"]
    assert entries[0]["timeout"] == 30.0


def test_teardown_restores_roce_mode_newest_first(tmp_path: Path, store: Store) -> None:
    hosts, pair = _pair(tmp_path, store)
    _roce(hosts.recorded("e810b"))
    journal = _journal(hosts, store)
    pin_devlink(hosts, pair, IWARP, journal)  # type: ignore[arg-type]
    journal.close().check("teardown")  # iWARP off before RoCE on, or ice refuses it
    assert _values(hosts, "e810b")["enable_roce"] == "true"
    assert _values(hosts, "e810b")["enable_iwarp"] == "false"
    assert store.journal_entries("e810b") == []


def test_a_failed_runs_values_are_restored_by_the_next_reservations_replay(
    tmp_path: Path, store: Store
) -> None:
    hosts, pair = _pair(tmp_path, store)
    _roce(hosts.recorded("e810b"))
    pin = (*IWARP, PinnedDevlink("local_forwarding", "prioritized"))
    pin_devlink(hosts, pair, pin, _journal(hosts, store, "dead-lease"))  # type: ignore[arg-type]
    # The run fails and dies here: nobody closes its journal; the next reservation replays it.
    replay(hosts, pair).check("replay")  # type: ignore[arg-type]
    for host, mode in (("e810a", "true"), ("e810b", "false")):
        values = _values(hosts, host)
        assert (values["enable_iwarp"], values["local_forwarding"]) == (mode, "enabled")


def test_a_refused_set_is_named_with_host_and_not_journaled(tmp_path: Path, store: Store) -> None:
    hosts, pair = _pair(tmp_path, store)
    _roce(hosts.recorded("e810b"))
    only_iwarp = (PinnedDevlink("enable_iwarp", "true"),)
    with pytest.raises(RemoteError) as e:
        pin_devlink(hosts, pair, only_iwarp, _journal(hosts, store))  # type: ignore[arg-type]
    assert str(e.value).startswith(
        f"e810b: cannot set devlink parameter enable_iwarp=true on {PF} (Error: ice: "
        "RoCEv2 is currently enabled."
    )
    assert "pin the other one false too" in str(e.value)
    assert store.journal_entries("e810b") == []


def test_a_parameter_the_kernel_lacks_is_named(tmp_path: Path, store: Store) -> None:
    hosts, pair = _pair(tmp_path, store)
    agent = hosts.recorded("e810a")
    doc = json.loads(agent.run(PARAM_SHOW.split()).stdout)
    doc["param"][PF] = [p for p in doc["param"][PF] if p["name"] != "local_forwarding"]
    agent.record(PARAM_SHOW, json.dumps(doc))  # a 6.1 ice
    pin = (PinnedDevlink("local_forwarding", "disabled"),)
    with pytest.raises(RemoteError, match=rf"^e810a: {PF} has no devlink parameter local_fo"):
        pin_devlink(hosts, pair, pin, _journal(hosts, store))  # type: ignore[arg-type]
