"""Module parameters on the recorded T6 pair (tests/data/t6): read, pinned under the
restore journal, read back on both hosts, restored at teardown and by a replayed journal."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path
from typing import Any

import pytest
from fake_hosts import FakeHosts, t6_hosts, t6_inventory

from hil.errors import RemoteError
from hil.host.journal import Journal, replay
from hil.host.modparams import pin_params, read_params
from hil.host.pairsetup import PairState, PortState
from hil.inventory.model import Inventory, Pair, PinnedParam
from hil.reservation import Store

PARAMS = "/sys/module/iw_cxgb4/parameters"
TIMEOUT = PinnedParam("iw_cxgb4", "ep_timeout_secs", "10")
MPA_REV = PinnedParam("iw_cxgb4", "mpa_rev", "1")


def _pair(
    tmp_path: Path, store: Store, inventory: Inventory | None = None
) -> tuple[FakeHosts, Pair]:
    hosts = t6_hosts(tmp_path / "hosts", inventory)
    hosts.store = store
    return hosts, hosts.inventory.pair("t6")


def _journal(hosts: FakeHosts, store: Store, lease: str = "lease-1") -> Journal:
    return Journal(hosts, store, lease)  # type: ignore[arg-type]


def _value(hosts: FakeHosts, host: str, name: str) -> str:
    return hosts.recorded(host).file(f"{PARAMS}/{name}").read_text()


def _writes(hosts: FakeHosts, host: str) -> list[dict[str, Any]]:
    return [p for m, p in hosts.agent(host).calls if m == "run" and p["argv"][0].endswith("tee")]


# -- reading ------------------------------------------------------------------------


def test_read_params_reads_every_known_parameter(tmp_path: Path, store: Store) -> None:
    hosts, _ = _pair(tmp_path, store)
    values = read_params(hosts.agent("t6a"), "t6a", "iw_cxgb4")
    assert values["ep_timeout_secs"] == "60"
    assert values["mpa_rev"] == "2"
    assert values["c4iw_wr_log_size_order"] == "12"
    assert len(values) == 19


def test_a_driver_without_parameters_reads_nothing(tmp_path: Path, store: Store) -> None:
    hosts, _ = _pair(tmp_path, store)
    assert read_params(hosts.agent("t6a"), "t6a", "siw") == {}
    assert hosts.agent("t6a").calls == []


def test_a_module_that_is_not_loaded_is_named_with_its_host(tmp_path: Path, store: Store) -> None:
    hosts, _ = _pair(tmp_path, store)
    shutil.rmtree(hosts.recorded("t6b").file("/sys/module/iw_cxgb4"))
    with pytest.raises(RemoteError) as e:
        read_params(hosts.agent("t6b"), "t6b", "iw_cxgb4")
    assert str(e.value).startswith("t6b: module iw_cxgb4 is not loaded")
    assert "modprobe iw_cxgb4" in str(e.value)


def test_a_parameter_the_driver_lacks_is_named(tmp_path: Path, store: Store) -> None:
    hosts, _ = _pair(tmp_path, store)
    hosts.recorded("t6a").file(f"{PARAMS}/dack_mode").unlink()
    with pytest.raises(RemoteError, match="module iw_cxgb4 has no parameter dack_mode"):
        read_params(hosts.agent("t6a"), "t6a", "iw_cxgb4")


# -- pinning --------------------------------------------------------------------------


def test_pinned_parameters_are_set_on_both_hosts_and_read_back(
    tmp_path: Path, store: Store
) -> None:
    hosts, pair = _pair(tmp_path, store)
    pinned = pin_params(hosts, pair, [TIMEOUT, MPA_REV], _journal(hosts, store))  # type: ignore[arg-type]
    expected = {"iw_cxgb4.ep_timeout_secs": "10", "iw_cxgb4.mpa_rev": "1"}
    assert pinned == {"t6a": expected, "t6b": expected}
    for host in ("t6a", "t6b"):
        assert _value(hosts, host, "ep_timeout_secs") == "10\n"
        assert _value(hosts, host, "mpa_rev") == "1\n"


def test_each_change_is_journaled_with_the_old_value_before_it_is_made(
    tmp_path: Path, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    hosts, pair = _pair(tmp_path, store)
    agent = hosts.recorded("t6a")
    write = agent._tee
    journaled_at_write: list[int] = []

    def tee(path: str, value: str) -> dict[str, Any]:
        journaled_at_write.append(len(store.journal_entries("t6a")))
        return write(path, value)

    monkeypatch.setattr(agent, "_tee", tee)
    pin_params(hosts, pair, [TIMEOUT], _journal(hosts, store))  # type: ignore[arg-type]
    for host in ("t6a", "t6b"):
        [entry] = [e.entry for e in store.journal_entries(host)]
        assert entry["what"] == "restore module parameter iw_cxgb4.ep_timeout_secs=60"
        assert entry["params"]["argv"][-1] == f"{PARAMS}/ep_timeout_secs"
        assert entry["params"]["input"] == "60\n"
    assert journaled_at_write == [1]


def test_a_value_already_in_place_is_not_changed(tmp_path: Path, store: Store) -> None:
    hosts, pair = _pair(tmp_path, store)
    pinned = pin_params(
        hosts,  # type: ignore[arg-type]
        pair,
        [PinnedParam("iw_cxgb4", "mpa_rev", "2")],
        _journal(hosts, store),
    )
    assert pinned["t6a"] == {"iw_cxgb4.mpa_rev": "2"}
    assert _writes(hosts, "t6a") == [] and store.journal_entries("t6a") == []


def test_teardown_restores_the_old_values(tmp_path: Path, store: Store) -> None:
    hosts, pair = _pair(tmp_path, store)
    journal = _journal(hosts, store)
    pin_params(hosts, pair, [TIMEOUT, MPA_REV], journal)  # type: ignore[arg-type]
    journal.close().check("teardown")
    for host in ("t6a", "t6b"):
        assert _value(hosts, host, "ep_timeout_secs") == "60\n"
        assert _value(hosts, host, "mpa_rev") == "2\n"
        assert store.journal_entries(host) == []


def test_a_killed_runs_values_are_restored_by_the_next_reservations_replay(
    tmp_path: Path, store: Store
) -> None:
    hosts, pair = _pair(tmp_path, store)
    pin_params(hosts, pair, [TIMEOUT], _journal(hosts, store, "dead-lease"))  # type: ignore[arg-type]
    # The run dies here: nobody closes its journal; the next run replays it.
    replay(hosts, pair).check("replay")  # type: ignore[arg-type]
    assert [_value(hosts, h, "ep_timeout_secs") for h in ("t6a", "t6b")] == ["60\n", "60\n"]


def test_a_value_the_driver_does_not_take_is_refused_and_still_restored(
    tmp_path: Path, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    hosts, pair = _pair(tmp_path, store)
    agent = hosts.recorded("t6b")
    # The write succeeds but the value stays (a driver clamping or ignoring it).
    monkeypatch.setattr(agent, "_tee", lambda path, value: agent._result(0, value))
    journal = _journal(hosts, store)
    with pytest.raises(RemoteError) as e:
        pin_params(hosts, pair, [TIMEOUT], journal)  # type: ignore[arg-type]
    assert str(e.value).startswith(
        "t6b: module parameter iw_cxgb4.ep_timeout_secs was set to 10 but reads back 60"
    )
    journal.close().check("teardown")
    assert _value(hosts, "t6a", "ep_timeout_secs") == "60\n"


def test_a_load_only_parameter_is_refused_by_the_host_and_not_journaled(
    tmp_path: Path, store: Store
) -> None:
    # The inventory refuses it first (tests/inventory); the host refuses it too (mode 444).
    hosts, pair = _pair(tmp_path, store)
    param = PinnedParam("iw_cxgb4", "c4iw_wr_log", "1")
    with pytest.raises(RemoteError) as e:
        pin_params(hosts, pair, [param], _journal(hosts, store))  # type: ignore[arg-type]
    assert str(e.value).startswith("t6a: cannot set module parameter iw_cxgb4.c4iw_wr_log=1")
    assert "Permission denied" in str(e.value)
    assert store.journal_entries("t6a") == []
    assert _value(hosts, "t6a", "c4iw_wr_log") == "0\n"


def test_a_host_without_the_module_fails_the_pin_naming_host_and_driver(
    tmp_path: Path, store: Store
) -> None:
    hosts, pair = _pair(tmp_path, store)
    shutil.rmtree(hosts.recorded("t6b").file("/sys/module/iw_cxgb4"))
    with pytest.raises(RemoteError, match=r"^t6b: module iw_cxgb4 is not loaded"):
        pin_params(hosts, pair, [TIMEOUT], _journal(hosts, store))  # type: ignore[arg-type]


def test_only_hosts_whose_port_uses_the_driver_are_pinned(tmp_path: Path, store: Store) -> None:
    inventory = t6_inventory()
    b = inventory.hosts["t6b"]
    siw = dataclasses.replace(b, rnics=(dataclasses.replace(b.rnics[0], driver="siw"),))
    mixed = dataclasses.replace(inventory, hosts={**inventory.hosts, "t6b": siw})
    hosts, pair = _pair(tmp_path, store, mixed)
    pinned = pin_params(hosts, pair, [TIMEOUT], _journal(hosts, store))  # type: ignore[arg-type]
    assert list(pinned) == ["t6a"]
    assert _value(hosts, "t6b", "ep_timeout_secs") == "60\n"


def test_a_host_that_fell_back_to_siw_is_not_pinned(tmp_path: Path, store: Store) -> None:
    inventory = t6_inventory()
    b = inventory.hosts["t6b"]
    fallback = dataclasses.replace(b, rnics=(dataclasses.replace(b.rnics[0], fallback="siw"),))
    hosts, pair = _pair(
        tmp_path, store, dataclasses.replace(inventory, hosts={**inventory.hosts, "t6b": fallback})
    )
    port = PortState("t6a", "p0", "enp129s0f4", None, 9000, "cxgb4_0", False)
    state = PairState(
        "t6", port, dataclasses.replace(port, host="t6b", rdma_device="siw_enp129s0f4"), True
    )
    # t6b's cxgb4 device is absent (so setup chose siw): its iw_cxgb4 module may be too.
    shutil.rmtree(hosts.recorded("t6b").file("/sys/module/iw_cxgb4"))
    pinned = pin_params(hosts, pair, [TIMEOUT], _journal(hosts, store), state)  # type: ignore[arg-type]
    assert list(pinned) == ["t6a"]
    assert _writes(hosts, "t6b") == [] and store.journal_entries("t6b") == []
