"""A netdev's driver through the real agent's SIOCETHTOOL call (no ethtool binary)."""

from __future__ import annotations

import errno

import pytest

from hil.agent import Agent, AgentCallError, DriverInfo


def test_a_veth_reports_its_driver(agent: Agent) -> None:
    agent.add_link("he0", "veth", peer="he1")
    info = agent.driver_info("he0")
    assert isinstance(info, DriverInfo)
    assert (info.netdev, info.driver) == ("he0", "veth")
    assert info.version  # veth says "1.0"
    assert info.bus_info == ""  # a virtual device sits on no bus


def test_an_absent_netdev_is_not_found_in_the_agents_namespace(agent: Agent) -> None:
    # eth-like names of the test's own namespace are not visible in the agent's.
    with pytest.raises(
        AgentCallError, match=r"SIOCETHTOOL \(ETHTOOL_GDRVINFO\) on nope0: No such device"
    ) as e:
        agent.driver_info("nope0")
    assert (e.value.kind, e.value.errno) == ("not_found", errno.ENODEV)


def test_a_driver_without_ethtool_support_gives_its_errno(agent: Agent) -> None:
    with pytest.raises(AgentCallError, match=r"on lo: Operation not supported") as e:
        agent.driver_info("lo")  # loopback has no ethtool driver info
    assert (e.value.kind, e.value.errno) == ("os", errno.EOPNOTSUPP)


def test_a_bad_name_is_refused_before_the_kernel_sees_it(agent: Agent) -> None:
    with pytest.raises(AgentCallError, match=r"not a network interface name: 'a/b'") as e:
        agent.driver_info("a/b")
    assert e.value.kind == "bad_params"
