"""Links and addresses through the real agent, in a throwaway network namespace."""

from __future__ import annotations

import errno
import ipaddress
import subprocess
import sys

import pytest

from hil.agent import Agent, AgentCallError
from hil.errors import WaitTimeout


@pytest.fixture
def veth(agent: Agent) -> tuple[str, str]:
    """A veth cable, both ends up (deleted with the namespace)."""
    agent.add_link("hv0", "veth", peer="hv1")
    agent.set_link("hv0", up=True)
    agent.set_link("hv1", up=True)
    return "hv0", "hv1"


def test_a_new_namespace_has_only_loopback(agent: Agent) -> None:
    assert [link.name for link in agent.links()] == ["lo"]


def test_a_veth_is_made_with_the_macs_given(agent: Agent) -> None:
    made = agent.add_link(
        "hm0", "veth", peer="hm0p", mac="02:68:69:6c:00:01", peer_mac="02:68:69:6c:00:02"
    )
    assert made.mac == "02:68:69:6c:00:01"
    assert agent.link("hm0p").mac == "02:68:69:6c:00:02"
    # set by the request itself (NET_ADDR_SET), so udev's persistent policy leaves them
    types = [
        agent.run(["cat", f"/sys/class/net/{n}/addr_assign_type"]).stdout for n in ("hm0", "hm0p")
    ]
    assert [t.strip() for t in types] == ["3", "3"]
    agent.delete_link("hm0")


def test_link_up_mtu_and_back(agent: Agent) -> None:
    created = agent.add_link("hd0", "veth", peer="hd0p")
    assert (created.kind, created.up, created.operstate) == ("veth", False, "DOWN")
    before = agent.set_link("hd0", up=True, mtu=1400)
    assert (before.up, before.mtu) == (False, 1500)  # the state to restore
    now = agent.wait_link("hd0", operstate="LOWERLAYERDOWN", timeout=5)  # peer still down
    assert (now.up, now.mtu) == (True, 1400)
    agent.set_link("hd0", up=False, mtu=before.mtu)
    assert agent.link("hd0") == created
    agent.delete_link("hd0")  # takes its peer with it
    assert [link.name for link in agent.links()] == ["lo"]


def test_veth_peer_down_drops_carrier_and_wait_sees_it(agent: Agent, veth: tuple[str, str]) -> None:
    a, b = veth
    up = agent.wait_link(a, operstate="UP", carrier=True, timeout=5)
    assert up.mac and up.index > 1
    agent.set_link(b, up=False)
    down = agent.wait_link(a, carrier=False, timeout=5)
    assert down.up
    # The kernel sets the operstate after the carrier (its linkwatch work, a moment later).
    assert agent.wait_link(a, operstate="LOWERLAYERDOWN", timeout=5).up


def test_wait_timeout_says_what_state_was_seen(agent: Agent, veth: tuple[str, str]) -> None:
    a, b = veth
    agent.set_link(b, up=False)
    # Once the kernel's linkwatch work has moved a's operstate on (else the UP it had may
    # still be read, and the wait below end at once).
    agent.wait_link(a, operstate="LOWERLAYERDOWN", timeout=5)
    with pytest.raises(
        WaitTimeout,
        match=r"hv0 did not reach operstate=UP within 0.3s: "
        r"seen operstate=LOWERLAYERDOWN carrier=False up=True",
    ):
        agent.wait_link(a, operstate="UP", timeout=0.3)


def test_addresses_add_list_delete_and_flush(agent: Agent) -> None:
    agent.add_link("hd1", "veth", peer="hd1p")
    agent.add_address("hd1", "198.18.5.1/24")
    agent.add_address("hd1", ipaddress.ip_interface("198.18.6.1/30"))
    agent.add_address("hd1", "2001:db8::1/64")
    have = {a.address for a in agent.addresses("hd1")}
    assert have == {
        ipaddress.ip_interface("198.18.5.1/24"),
        ipaddress.ip_interface("198.18.6.1/30"),
        ipaddress.ip_interface("2001:db8::1/64"),
    }
    agent.delete_address("hd1", "198.18.6.1/30")
    removed = agent.flush_addresses("hd1", family=4)
    assert [str(a.address) for a in removed] == ["198.18.5.1/24"]
    assert [str(a.address) for a in agent.addresses("hd1")] == ["2001:db8::1/64"]
    agent.flush_addresses("hd1")
    assert agent.addresses("hd1") == []


def test_kernel_errors_name_the_operation_interface_and_errno(agent: Agent) -> None:
    agent.add_link("hd2", "veth", peer="hd2p")
    agent.add_address("hd2", "198.18.7.1/24")
    with pytest.raises(AgentCallError, match=r"hd2.*File exists \(EEXIST\)") as e:
        agent.add_address("hd2", "198.18.7.1/24")
    assert (e.value.kind, e.value.errno) == ("netlink", errno.EEXIST)
    with pytest.raises(AgentCallError, match=r"add veth link hd2: File exists"):
        agent.add_link("hd2", "veth", peer="hd3")
    with pytest.raises(AgentCallError, match=r"set link hd2: Invalid argument \(EINVAL\)"):
        agent.set_link("hd2", mtu=10)  # below the minimum
    with pytest.raises(AgentCallError, match=r"delete address 198.18.9.1/24 hd2: .*EADDRNOTAVAIL"):
        agent.delete_address("hd2", "198.18.9.1/24")


def test_missing_interface_and_bad_address_are_clear(agent: Agent) -> None:
    with pytest.raises(AgentCallError, match=r"agent set_link: no network interface 'eth9'") as e:
        agent.set_link("eth9", up=True)
    assert e.value.kind == "not_found"
    with pytest.raises(AgentCallError, match=r"not an address with prefix: '198.18.0.300/24'") as e:
        agent.add_address("lo", "198.18.0.300/24")
    assert e.value.kind == "bad_params"


def test_netlink_imports_pyroute2s_iproute_without_the_rest_of_pyroute2() -> None:
    # In a process of its own: the bare pyroute2 package must not meet this one's.
    probe = (
        "import sys; from hil.agent.remote import netlink; ipr, err = netlink._pyroute2(); "
        "print(ipr.__module__, err.__name__, 'pyroute2.conntrack' in sys.modules, "
        "'pyroute2.ndb.main' in sys.modules); "
        "import pyroute2.iproute as i; print(i.IPRoute is ipr)"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    ).stdout.split()
    assert out == ["pyroute2.iproute.linux", "NetlinkError", "False", "False", "True"]
