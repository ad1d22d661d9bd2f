"""environment.properties records the module parameters hil knows of each port's driver,
as read on the recorded T6 pair (tests/data/t6), and an irdma port's devlink parameters,
as read on the recorded E810 pair (tests/data/e810)."""

from __future__ import annotations

import shutil
from pathlib import Path

from fake_hosts import e810_hosts, t6_hosts

from hil.report.environment import devlink_properties, gather, module_properties

PARAMS = "/sys/module/iw_cxgb4/parameters"


def test_every_known_parameter_is_recorded_per_host_as_read_there(tmp_path: Path) -> None:
    hosts = t6_hosts(tmp_path)
    hosts.recorded("t6b").write(f"{PARAMS}/ep_timeout_secs", "10\n")  # as a pin left it
    a = module_properties(hosts.agent("t6a"), "t6a", "iw_cxgb4")
    b = module_properties(hosts.agent("t6b"), "t6b", "iw_cxgb4")
    assert (a["t6a.iw_cxgb4.ep_timeout_secs"], b["t6b.iw_cxgb4.ep_timeout_secs"]) == ("60", "10")
    assert a["t6a.iw_cxgb4.c4iw_wr_log_size_order"] == "12"
    assert len(b) == 19


def test_a_driver_without_parameters_adds_nothing(tmp_path: Path) -> None:
    hosts = t6_hosts(tmp_path)
    assert module_properties(hosts.agent("t6a"), "t6a", "siw") == {}


def test_a_module_not_loaded_is_recorded_as_unknown_saying_why(tmp_path: Path) -> None:
    hosts = t6_hosts(tmp_path)
    shutil.rmtree(hosts.recorded("t6a").file("/sys/module/iw_cxgb4"))
    props = module_properties(hosts.agent("t6a"), "t6a", "iw_cxgb4")
    assert list(props) == ["t6a.iw_cxgb4"]
    assert props["t6a.iw_cxgb4"].startswith(
        "unknown: reading module parameters failed on t6a: module iw_cxgb4 is not loaded"
    )


def test_an_irdma_ports_devlink_parameters_are_recorded_as_read_there(tmp_path: Path) -> None:
    hosts = e810_hosts(tmp_path)
    props = gather(hosts, hosts.inventory.pair("e810"))
    assert props["e810a.devlink.enable_iwarp"] == "true (runtime)"
    assert props["e810b.devlink.tx_scheduling_layers"] == "9 (permanent)"
    assert props["e810b.devlink.local_forwarding"] == "enabled (runtime)"


def test_other_drivers_have_no_devlink_properties(tmp_path: Path) -> None:
    hosts = t6_hosts(tmp_path)
    pair = hosts.inventory.pair("t6")
    assert devlink_properties(hosts.agent("t6a"), "t6a", pair.rnic_a) == {}


def test_unreadable_devlink_parameters_are_unknown_saying_why(tmp_path: Path) -> None:
    hosts = e810_hosts(tmp_path)
    hosts.recorded("e810a").forget("devlink -j dev param show")
    rnic = hosts.inventory.pair("e810").rnic_a
    assert devlink_properties(hosts.agent("e810a"), "e810a", rnic) == {
        "e810a.devlink": "unknown: reading devlink parameters failed on e810a: cannot read "
        "devlink dev param show (not recorded: devlink -j dev param show)"
    }
