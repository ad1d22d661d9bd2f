"""A fake of the agent boundary for host-control unit tests.

``FakeHosts`` stands where ``hil.host.hosts.Hosts`` stands; each host gets a
``FakeAgent`` holding a small model of its state (links, addresses, sysctls,
RDMA devices) that the agent's calls read and change, and a log of the calls.
Real sshd and netlink are used by the netns tests; this is for what the host
kernel here cannot do (RDMA) and for failure paths.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hil.agent.client import AgentCallError
from hil.agent.types import AddressInfo, CommandResult, LinkInfo, RdmaLink
from hil.errors import InputError
from hil.inventory.model import Host, Inventory, Link, LinkEnd, Pull, Rnic, SshConfig


@dataclass
class FakeLink:
    mtu: int = 1500
    up: bool = False
    addresses: set[str] = field(default_factory=set)


class FakeAgent:
    """One host's agent: ``state`` changed by calls, ``calls`` logged, ``fail`` injected."""

    def __init__(self, host: str, links: dict[str, FakeLink], rdma: bool = True) -> None:
        self.host = host
        self.links = links
        self.rdma = rdma
        self.rdma_devices: dict[str, str] = {}  # device -> netdev
        self.sysctls: dict[str, str] = {}
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.fail: dict[str, str] = {}  # method -> error kind to raise

    def call(self, method: str, timeout: float = 30.0, **params: Any) -> Any:
        self.calls.append((method, params))
        if method in self.fail:
            raise AgentCallError(self.host, method, self.fail[method], "injected", {})
        return getattr(self, f"_op_{method}")(**params)

    # -- operations, as the remote agent answers them ---------------------------

    def _link(self, netdev: str) -> FakeLink:
        if netdev not in self.links:
            raise AgentCallError(self.host, "link", "not_found", f"no {netdev}", {})
        return self.links[netdev]

    def _op_link(self, netdev: str) -> dict[str, Any]:
        link = self._link(netdev)
        return {
            "name": netdev,
            "index": 2,
            "mtu": link.mtu,
            "operstate": "UP" if link.up else "DOWN",
            "carrier": link.up,
            "up": link.up,
            "mac": None,
            "kind": None,
        }

    def _op_set_link(self, netdev: str, up: bool | None = None, mtu: int | None = None) -> Any:
        before = self._op_link(netdev)
        link = self._link(netdev)
        link.mtu = link.mtu if mtu is None else mtu
        link.up = link.up if up is None else up
        return before

    def _op_wait_link(self, netdev: str, **_: Any) -> Any:
        return self._op_link(netdev)

    def _op_addresses(self, netdev: str) -> list[dict[str, Any]]:
        return [{"netdev": netdev, "address": a, "scope": 0} for a in self._link(netdev).addresses]

    def _op_add_address(self, netdev: str, address: str) -> None:
        self._link(netdev).addresses.add(address)

    def _op_delete_address(self, netdev: str, address: str) -> None:
        if address not in self._link(netdev).addresses:
            raise AgentCallError(
                self.host, "delete_address", "netlink", "gone", {"errname": "EADDRNOTAVAIL"}
            )
        self._link(netdev).addresses.discard(address)

    def _op_sysctl_get(self, name: str) -> str:
        return self.sysctls.setdefault(name, "0")

    def _op_sysctl_set(self, name: str, value: str) -> str:
        old = self._op_sysctl_get(name)
        self.sysctls[name] = value
        return old

    def _op_run(self, argv: list[str], input: str | None = None) -> dict[str, Any]:
        return {"status": 0, "stdout": "", "stderr": ""}

    def _op_rdma_links(self) -> list[dict[str, Any]]:
        if not self.rdma:
            raise AgentCallError(self.host, "rdma_links", "rdma_unavailable", "no RDMA netlink", {})
        return [
            {"device": d, "port": 1, "state": "ACTIVE", "physical_state": "LINK_UP", "netdev": n}
            for d, n in self.rdma_devices.items()
        ]

    def _op_rdma_add_siw(self, name: str, netdev: str) -> None:
        self._op_rdma_links()
        self.rdma_devices[name] = netdev

    def _op_rdma_delete_link(self, name: str) -> None:
        if self.rdma_devices.pop(name, None) is None:
            raise AgentCallError(self.host, "rdma_delete_link", "not_found", name, {})

    # -- the typed facade hil.agent.Agent offers --------------------------------

    def link(self, netdev: str) -> LinkInfo:
        return LinkInfo.from_wire(self.call("link", netdev=netdev))

    def set_link(self, netdev: str, up: bool | None = None, mtu: int | None = None) -> LinkInfo:
        return LinkInfo.from_wire(self.call("set_link", netdev=netdev, up=up, mtu=mtu))

    def wait_link(
        self,
        netdev: str,
        operstate: str | None = None,
        carrier: bool | None = None,
        timeout: float = 10.0,
    ) -> LinkInfo:
        return LinkInfo.from_wire(self.call("wait_link", timeout=timeout, netdev=netdev))

    def addresses(self, netdev: str) -> list[AddressInfo]:
        return [AddressInfo.from_wire(d) for d in self.call("addresses", netdev=netdev)]

    def add_address(self, netdev: str, address: Any) -> None:
        self.call("add_address", netdev=netdev, address=str(address))

    def sysctl(self, name: str) -> str:
        return self.call("sysctl_get", name=name)

    def set_sysctl(self, name: str, value: Any) -> str:
        return self.call("sysctl_set", name=name, value=str(value))

    def run(
        self, argv: list[str], timeout: float = 60.0, input: str | None = None, check: bool = False
    ) -> CommandResult:
        r = self.call("run", timeout=timeout, argv=list(argv), input=input)
        return CommandResult(tuple(argv), r["status"], r["stdout"], r["stderr"])

    def rdma_links(self) -> list[RdmaLink]:
        return [RdmaLink(**d) for d in self.call("rdma_links")]

    def add_siw(self, name: str, netdev: str) -> None:
        self.call("rdma_add_siw", name=name, netdev=netdev)


class FakeHosts:
    """``Hosts`` with a ``FakeAgent`` per host of ``inventory``."""

    def __init__(self, inventory: Inventory, store: Any = None) -> None:
        self.inventory = inventory
        self.store = store
        self.agents = {
            name: FakeAgent(name, {r.netdev: FakeLink() for r in h.rnics})
            for name, h in inventory.hosts.items()
        }

    def host(self, name: str) -> Host:
        if name not in self.inventory.hosts:
            raise InputError(f"no host {name!r}")
        return self.inventory.hosts[name]

    def agent(self, name: str) -> FakeAgent:
        self.host(name)
        return self.agents[name]

    def call(self, name: str, method: str, /, timeout: float | None = None, **params: Any) -> Any:
        return self.agent(name).call(method, timeout=timeout or 30.0, **params)


def two_host_inventory(
    rdma_device: str | None = "cxgb4_0", fallback: str | None = None, sysctls: tuple = ()
) -> Inventory:
    """Hosts ``a`` and ``b``, port ``p0`` on netdev ``eth1``, link ``ab`` with an admin pull."""

    def host(name: str, ip: str) -> Host:
        rnic = Rnic(
            "p0",
            "eth1",
            "iw_cxgb4",
            rdma_device=rdma_device,
            address=ipaddress.ip_interface(ip),
            mtu=9000,
            fallback=fallback,  # type: ignore[arg-type]
        )
        return Host(name, SshConfig(host=name), rnics=(rnic,), sysctls=sysctls)

    link = Link("ab", LinkEnd("a", "p0"), LinkEnd("b", "p0"), pulls=(Pull("admin"),))
    return Inventory(
        Path("test.yaml"),
        hosts={"a": host("a", "198.18.0.1/24"), "b": host("b", "198.18.0.2/24")},
        links={"ab": link},
    )
