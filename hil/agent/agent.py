"""``Agent``: start the agent on a host (or locally) and call it through typed methods.

Each method is one agent call, made with its declaration in
``hil.agent.protocol``: plain data out, the reply
decoded and turned into frozen dataclasses, and a ``HilError`` naming the host
when it fails (``AgentCallError`` keeps the agent's error kind and errno).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any, Protocol, Self

from hil.agent.build import build
from hil.agent.client import AgentClient, request
from hil.agent.deploy import REMOTE_DIR, push
from hil.agent.protocol import (
    ADD_ADDRESS,
    ADD_LINK,
    ADDRESSES,
    DELETE_ADDRESS,
    DELETE_LINK,
    ETHTOOL_DRVINFO,
    FLUSH_ADDRESSES,
    KMSG_CLOSE,
    KMSG_CURSOR,
    KMSG_READ,
    LINK,
    LINKS,
    PING,
    RDMA_ADD_SIW,
    RDMA_DELETE_LINK,
    RDMA_DEVICES,
    RDMA_LINKS,
    RDMA_RESOURCE_ROWS,
    RDMA_RESOURCES,
    RUN,
    SET_LINK,
    SYSCTL_GET,
    SYSCTL_SET,
    WAIT_LINK,
    AddLinkParams,
    AddressesParams,
    AddressParams,
    AddSiwParams,
    CursorParams,
    FlushAddressesParams,
    NameParams,
    NetdevParams,
    NoParams,
    ResourceRowsParams,
    ResourcesParams,
    RunParams,
    SetLinkParams,
    SysctlGetParams,
    SysctlSetParams,
    WaitLinkParams,
)
from hil.agent.transport import LocalChannel, SSHChannel
from hil.agent.types import (
    AddressInfo,
    CommandResult,
    DriverInfo,
    KernelLog,
    LinkInfo,
    RdmaDevice,
    RdmaLink,
)
from hil.errors import AgentError, CommandFailed
from hil.inventory.model import Host, IPInterface
from hil.ssh import SSHSession


class Runner(Protocol):
    """What a reader of host files and commands needs of an agent: its ``run``.

    :class:`Agent` is one; tests pass recorded hosts (tests/fake_hosts.py).
    """

    def run(self, argv: list[str], timeout: float = ...) -> CommandResult: ...


class Agent(AgentClient):
    """A running agent on one host; use as a context manager or call ``close()``."""

    @classmethod
    def start(cls, session: SSHSession, host: Host, remote_dir: str = REMOTE_DIR) -> Self:
        """Upload the agent to ``host`` over ``session`` (cached) and start it there.

        Runs ``host.python``, through ``sudo -n`` when ``host.ssh.sudo`` says so.
        ``remote_dir`` (relative to the SSH user's home, or absolute) holds the
        uploaded builds.
        """
        bundle = build()
        path = push(session, bundle, host.name, remote_dir)
        # -S: no site module; the agent needs nothing outside the standard library
        # and its bundle, and site's path scan cost a TCG lab guest 0.15-0.2 s of
        # CPU per start (docs/notes/lab-speed.md, 2026-12-05 cifast2).
        process = session.open_process([host.python, "-I", "-S", path], sudo=True)
        return cls(SSHChannel(process), host.name, expect_hash=bundle.sha256)

    @classmethod
    def local(cls, argv_prefix: Sequence[str] | None = None, name: str = "local") -> Self:
        """Run the agent here: ``argv_prefix`` is the command up to the python
        interpreter, e.g. ``["ip", "netns", "exec", "ns1", "/usr/bin/python3"]``."""
        bundle = build()
        argv = [*(argv_prefix or [sys.executable]), "-I", str(bundle.path)]
        try:
            channel = LocalChannel(argv)
        except OSError as e:
            raise AgentError(name, f"cannot start the agent ({' '.join(argv)}): {e}") from None
        return cls(channel, name, expect_hash=bundle.sha256)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- links and addresses ------------------------------------------------

    def ping(self) -> int:
        """One round trip; the agent's pid."""
        return request(self, PING, NoParams())["pid"]

    def links(self) -> list[LinkInfo]:
        """Every link on the host (in the agent's network namespace)."""
        return [LinkInfo.from_wire(d) for d in request(self, LINKS, NoParams())]

    def link(self, netdev: str) -> LinkInfo:
        """The link ``netdev``; ``AgentCallError`` kind ``not_found`` when absent."""
        return LinkInfo.from_wire(request(self, LINK, NetdevParams(netdev=netdev)))

    def set_link(self, netdev: str, up: bool | None = None, mtu: int | None = None) -> LinkInfo:
        """Set ``netdev`` up/down and/or its mtu; returns the link as it was before."""
        params = SetLinkParams(netdev=netdev, up=up, mtu=mtu)
        return LinkInfo.from_wire(request(self, SET_LINK, params))

    def wait_link(
        self,
        netdev: str,
        operstate: str | None = None,
        carrier: bool | None = None,
        timeout: float = 10.0,
    ) -> LinkInfo:
        """Wait until ``netdev`` has ``operstate`` and/or ``carrier``.

        ``WaitTimeout`` (with the state last seen) when it does not within ``timeout``.
        """
        params = WaitLinkParams(netdev=netdev, operstate=operstate, carrier=carrier)
        return LinkInfo.from_wire(request(self, WAIT_LINK, params, timeout))

    def add_link(
        self,
        name: str,
        kind: str,
        peer: str | None = None,
        mac: str | None = None,
        peer_mac: str | None = None,
    ) -> LinkInfo:
        """Create a virtual link (``dummy``; ``veth`` with ``peer``), with the MACs given
        set as it is created (so that udev does not replace them)."""
        params = AddLinkParams(name=name, kind=kind, peer=peer, mac=mac, peer_mac=peer_mac)
        return LinkInfo.from_wire(request(self, ADD_LINK, params))

    def delete_link(self, name: str) -> None:
        """Delete link ``name``."""
        request(self, DELETE_LINK, NameParams(name=name))

    def addresses(self, netdev: str | None = None) -> list[AddressInfo]:
        """Addresses of ``netdev``, or of every link."""
        found = request(self, ADDRESSES, AddressesParams(netdev=netdev))
        return [AddressInfo.from_wire(d) for d in found]

    def add_address(self, netdev: str, address: IPInterface | str) -> None:
        """Add ``address`` (with prefix, e.g. ``198.18.0.1/24``) to ``netdev``."""
        params = AddressParams(netdev=netdev, address=str(address))
        request(self, ADD_ADDRESS, params)

    def delete_address(self, netdev: str, address: IPInterface | str) -> None:
        """Remove ``address`` from ``netdev``."""
        params = AddressParams(netdev=netdev, address=str(address))
        request(self, DELETE_ADDRESS, params)

    def flush_addresses(self, netdev: str, family: int | None = None) -> list[AddressInfo]:
        """Remove every address (or every IPv4/IPv6 one) of ``netdev``; returns them."""
        params = FlushAddressesParams(netdev=netdev, family=family)
        return [AddressInfo.from_wire(d) for d in request(self, FLUSH_ADDRESSES, params)]

    def driver_info(self, netdev: str) -> DriverInfo:
        """Driver, driver version, firmware and bus of ``netdev`` (no ethtool needed).

        ``AgentCallError`` kind ``not_found`` when there is no such netdev, ``os``
        (with ``errno``) when its driver refuses the query.
        """
        return DriverInfo(**request(self, ETHTOOL_DRVINFO, NetdevParams(netdev=netdev)))

    # -- sysctls and commands -----------------------------------------------

    def sysctl(self, name: str) -> str:
        """The value of sysctl ``name`` (``net.ipv4.ip_forward``)."""
        return request(self, SYSCTL_GET, SysctlGetParams(name=name))

    def set_sysctl(self, name: str, value: str | int) -> str:
        """Set sysctl ``name``; returns the old value, for the restore."""
        return request(self, SYSCTL_SET, SysctlSetParams(name=name, value=str(value)))

    def run(
        self,
        argv: Sequence[str],
        timeout: float = 60.0,
        input: str | None = None,
        check: bool = False,
    ) -> CommandResult:
        """Run ``argv`` on the host (no shell); ``CommandFailed`` if ``check`` and non-zero.

        ``CommandTimeout`` when it runs past ``timeout`` (the agent kills it).
        """
        r = request(self, RUN, RunParams(argv=list(argv), input=input), timeout)
        result = CommandResult(tuple(argv), r["status"], r["stdout"], r["stderr"])
        if check and result.status != 0:
            raise CommandFailed(self.host, list(argv), result.status, result.stdout, result.stderr)
        return result

    # -- RDMA ---------------------------------------------------------------

    def rdma_devices(self, timeout: float | None = None) -> list[RdmaDevice]:
        """RDMA devices; ``AgentCallError`` kind ``rdma_unavailable`` without RDMA."""
        return [RdmaDevice(**d) for d in request(self, RDMA_DEVICES, NoParams(), timeout)]

    def rdma_links(self, timeout: float | None = None) -> list[RdmaLink]:
        """RDMA ports and their netdevs."""
        return [RdmaLink(**d) for d in request(self, RDMA_LINKS, NoParams(), timeout)]

    def add_siw(self, name: str, netdev: str, timeout: float | None = None) -> None:
        """Create soft-iWARP device ``name`` on ``netdev``."""
        request(self, RDMA_ADD_SIW, AddSiwParams(name=name, netdev=netdev), timeout)

    def delete_rdma_link(self, name: str, timeout: float | None = None) -> None:
        """Delete RDMA link ``name`` (a siw device)."""
        request(self, RDMA_DELETE_LINK, NameParams(name=name), timeout)

    def rdma_resources(
        self, types: Sequence[str] | None = None, timeout: float | None = None
    ) -> dict[str, int]:
        """Counts of RDMA resources by type (cm_id, qp, cq, mr, pd, ctx, srq); a type the
        host's ``rdma resource show`` summary does not list is absent from the reply."""
        params = ResourcesParams(types=list(types) if types else None)
        return request(self, RDMA_RESOURCES, params, timeout)

    def rdma_resource_rows(self, kind: str, timeout: float | None = None) -> list[dict[str, Any]]:
        """Every RDMA resource of ``kind`` (cm_id, qp, cq, mr, pd, ctx, srq) as
        ``rdma -j resource show`` prints it on the host (keys vary with its iproute2)."""
        params = ResourceRowsParams(type=kind)
        return request(self, RDMA_RESOURCE_ROWS, params, timeout)

    # -- kernel log ---------------------------------------------------------

    def kmsg_cursor(self) -> int:
        """A cursor at the current end of the kernel log."""
        return request(self, KMSG_CURSOR, NoParams())

    def kmsg_read(self, cursor: int) -> KernelLog:
        """What the kernel logged since ``cursor`` was made or last read."""
        return KernelLog.from_wire(request(self, KMSG_READ, CursorParams(cursor=cursor)))

    def kmsg_close(self, cursor: int) -> None:
        """Release ``cursor``."""
        request(self, KMSG_CLOSE, CursorParams(cursor=cursor))
