"""The recorded E810 fake host serves its sysfs tree and commands as a real host's agent would."""

from __future__ import annotations

import json
from pathlib import Path

from fake_hosts import E810_DATA, E810_NETDEV, e810_hosts

IB = "/sys/class/infiniband/irdma0"


def test_the_device_sits_on_the_pci_function_bound_by_ice(tmp_path: Path) -> None:
    agent = e810_hosts(tmp_path).recorded("e810a")
    assert agent.run(["cat", f"{IB}/node_desc", f"{IB}/node_type"]).stdout == "\n4: RNIC\n"
    parent = agent.run(["readlink", "-f", f"{IB}/device"]).stdout.strip()
    assert parent.endswith("/0000:17:00.0")
    driver = agent.run(["readlink", "-f", f"{IB}/device/driver"]).stdout
    assert driver == "/sys/bus/pci/drivers/ice\n"
    aux = agent.run(["readlink", "-f", f"{IB}/device/ice.iwarp.0/driver"]).stdout
    assert aux == "/sys/bus/auxiliary/drivers/irdma.gen_2\n"


def test_recorded_commands_give_firmware_devlink_and_the_port(tmp_path: Path) -> None:
    agent = e810_hosts(tmp_path).recorded("e810b")
    info = agent.driver_info(E810_NETDEV)
    assert (info.driver, info.firmware) == ("ice", "4.40 0x8001c967 1.3534.0")
    params = json.loads(agent.run(["devlink", "-j", "dev", "param", "show"]).stdout)
    names = [p["name"] for p in params["param"]["pci/0000:17:00.0"]]
    assert names[:2] == ["enable_roce", "enable_iwarp"]
    ports = agent.rdma_links()
    assert [(p.device, p.netdev, p.state) for p in ports] == [("irdma0", E810_NETDEV, "ACTIVE")]


def test_ethtool_s_answers_with_each_hosts_recording(tmp_path: Path) -> None:
    for host in ("e810a", "e810b"):
        agent = e810_hosts(tmp_path / host).recorded(host)
        stats = agent.run(["ethtool", "-S", E810_NETDEV])
        assert stats.status == 0
        assert stats.stdout == (E810_DATA / host / "cmd" / "ethtool-S.txt").read_text()
        assert stats.stdout.startswith("NIC statistics:\n     rx_unicast: ")  # ice pads no names
