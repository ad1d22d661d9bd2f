"""The recorded T6 fake host serves its files and commands as a real host's agent would."""

from __future__ import annotations

from pathlib import Path

import pytest
from fake_hosts import T6_NETDEV, t6_hosts

from hil.agent.client import AgentCallError

PARAMS = "/sys/module/iw_cxgb4/parameters"
IB = "/sys/class/infiniband/cxgb4_0"


def test_files_are_served_by_cat_readlink_and_stat(tmp_path: Path) -> None:
    agent = t6_hosts(tmp_path).recorded("t6a")
    desc = agent.run(["cat", f"{IB}/node_desc"])
    assert (desc.status, desc.stdout) == (0, "cxgb4 Chelsio Communications\n")
    driver = agent.run(["readlink", "-f", f"{IB}/device/driver"])
    assert driver.stdout == "/sys/bus/pci/drivers/cxgb4\n"
    assert agent.run(["stat", "-c", "%a", f"{PARAMS}/ep_timeout_secs"]).stdout == "644\n"
    assert agent.run(["stat", "-c", "%a", f"{PARAMS}/c4iw_wr_log"]).stdout == "444\n"
    missing = agent.run(["cat", f"{IB}/nothing"])
    assert missing.status == 1 and "No such file" in missing.stderr


def test_tee_writes_a_writable_file_and_refuses_a_read_only_one(tmp_path: Path) -> None:
    agent = t6_hosts(tmp_path).recorded("t6b")
    assert agent.run(["tee", f"{PARAMS}/ep_timeout_secs"], input="10").status == 0
    assert agent.run(["cat", f"{PARAMS}/ep_timeout_secs"]).stdout == "10"
    refused = agent.run(["tee", f"{PARAMS}/c4iw_wr_log"], input="1")
    assert refused.status == 1 and "Permission denied" in refused.stderr
    # the recorded data is a copy: the other host's tree is untouched
    assert (
        t6_hosts(tmp_path / "again").recorded("t6b").file(f"{PARAMS}/ep_timeout_secs").read_text()
        == "60\n"
    )


def test_recorded_commands_and_what_is_not_recorded(tmp_path: Path) -> None:
    agent = t6_hosts(tmp_path).recorded("t6a")
    assert agent.run(["pgrep", "-x", "iwpmd"]).stdout.strip().isdigit()
    stats = agent.run(["ethtool", "-S", T6_NETDEV]).stdout
    assert stats.startswith("NIC statistics:\n") and "     tx_octets_ok           : " in stats
    missing = agent.run(["ethtool", "-k", T6_NETDEV])
    assert (missing.status, missing.stderr) == (127, f"not recorded: ethtool -k {T6_NETDEV}\n")
    agent.record("pgrep -x iwpmd", status=1)
    assert agent.run(["pgrep", "-x", "iwpmd"]).status == 1


def test_driver_info_and_rdma_links_come_from_the_recorded_commands(tmp_path: Path) -> None:
    agent = t6_hosts(tmp_path).recorded("t6a")
    info = agent.driver_info(T6_NETDEV)
    assert (info.driver, info.firmware, info.bus_info) == (
        "cxgb4",
        "1.27.4.0, TP 0.1.23.2",
        "0000:81:00.4",
    )
    ports = {(link.device, link.port): link for link in agent.rdma_links()}
    assert ports["cxgb4_0", 1].netdev == T6_NETDEV and ports["cxgb4_0", 1].state == "ACTIVE"
    agent.forget("rdma -j link show")
    with pytest.raises(AgentCallError):
        agent.rdma_links()


def test_link_reads_and_set_link_writes_sysfs(tmp_path: Path) -> None:
    agent = t6_hosts(tmp_path).recorded("t6a")
    assert agent.link(T6_NETDEV).mtu == 9000
    agent.set_link(T6_NETDEV, mtu=1500)
    assert agent.run(["cat", f"/sys/class/net/{T6_NETDEV}/mtu"]).stdout == "1500\n"
