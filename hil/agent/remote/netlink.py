"""Links and addresses through rtnetlink (pyroute2), as plain JSON-safe data.

pyroute2's sync ``IPRoute`` drives its own event loop and is not safe to
share between the agent's worker threads, so each operation opens one (about
a millisecond) and closes it.

Importing pyroute2 is most of the agent's start-up, so it happens in
``preload()``, after the handshake, while the controller goes on with other
work; a call that comes first waits for the import to finish (under
``_import_lock``: python 3.9 hands a second thread importing a package that
another is still initialising the half-made module, and the import then
fails).  Only ``pyroute2.iproute`` and what it needs are imported: the
package's ``__init__`` imports all of pyroute2 (conntrack, ipdb, ndb,
nl80211, wireguard...: 370 modules, about 40% of the import time), so it is
set up as a bare package without running it (:func:`_pyroute2`).
"""

from __future__ import annotations

import errno
import importlib.util
import ipaddress
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Literal

from ..protocol import AddressReply, LinkReply, MethodName
from .errors import OpError

if TYPE_CHECKING:
    from typing import Protocol

    from pyroute2 import IPRoute  # untyped: an IPRoute is Any to mypy

    class _Message(Protocol):
        """A pyroute2 netlink message: its header fields by key, its attributes by get()."""

        def __getitem__(self, key: str) -> Any: ...

        def get(self, key: str) -> Any: ...


IFF_UP = 0x1
_POLL_INTERVAL = 0.05
_import_lock = threading.Lock()


def preload() -> None:
    """Import pyroute2 now (in a background thread), so the first call need not."""
    try:
        _pyroute2()
    except Exception:  # noqa: BLE001 - the first netlink call reports it
        return


def _pyroute2() -> tuple[Any, Any]:
    """pyroute2's ``IPRoute`` and ``NetlinkError``, imported without the package's __init__.

    The package module is made from its spec but not executed: its
    submodules import what they use themselves, so ``pyroute2.iproute``
    works without the rest.
    """
    with _import_lock:
        if "pyroute2" not in sys.modules:
            spec = importlib.util.find_spec("pyroute2")
            if spec is None:
                raise ImportError("pyroute2 is not in the agent's zipapp")
            sys.modules["pyroute2"] = importlib.util.module_from_spec(spec)
        from pyroute2.iproute import IPRoute
        from pyroute2.netlink.exceptions import NetlinkError

    return IPRoute, NetlinkError


@contextmanager
def _iproute(op: str, netdev: str | None = None) -> Iterator[IPRoute]:
    """An IPRoute whose kernel errors become OpErrors naming ``op`` and ``netdev``."""
    IPRoute, NetlinkError = _pyroute2()

    where = f"{op} {netdev}" if netdev else op
    try:
        with IPRoute() as ipr:
            yield ipr
    except NetlinkError as e:
        name = errno.errorcode.get(e.code, str(e.code))
        raise OpError(
            "netlink",
            f"{where}: {os.strerror(e.code)} ({name})",
            errno=e.code,
            errname=name,
            op=op,
            netdev=netdev,
        ) from None


def _index(ipr: IPRoute, netdev: str) -> int:
    found = ipr.link_lookup(ifname=netdev)
    if not found:
        raise OpError("not_found", f"no network interface {netdev!r}", netdev=netdev)
    return int(found[0])


def _link(msg: _Message) -> LinkReply:
    return {
        "name": msg.get("IFLA_IFNAME"),
        "index": msg["index"],
        "mtu": msg.get("IFLA_MTU"),
        "operstate": msg.get("IFLA_OPERSTATE"),
        "carrier": bool(msg.get("IFLA_CARRIER")),
        "up": bool(msg["flags"] & IFF_UP),
        "mac": msg.get("IFLA_ADDRESS"),
        "kind": _kind(msg),
    }


def _kind(msg: _Message) -> str | None:
    info = msg.get("IFLA_LINKINFO")
    return info.get("IFLA_INFO_KIND") if info else None


def _address(msg: _Message, names: dict[int, str]) -> AddressReply:
    addr = msg.get("IFA_LOCAL") or msg.get("IFA_ADDRESS")
    return {
        "netdev": names.get(msg["index"], str(msg["index"])),
        "address": f"{addr}/{msg['prefixlen']}",
        "family": 6 if ":" in addr else 4,
        "scope": msg["scope"],
    }


def links() -> list[LinkReply]:
    """Every link of the namespace, sorted by index."""
    with _iproute("list links") as ipr:
        return sorted((_link(m) for m in ipr.get_links()), key=lambda x: x["index"])


def link(netdev: str) -> LinkReply:
    """The link ``netdev``."""
    with _iproute("show link", netdev) as ipr:
        return _link(ipr.get_links(_index(ipr, netdev))[0])


def addresses(netdev: str | None = None) -> list[AddressReply]:
    """Addresses of ``netdev`` (or of every link), with prefix length."""
    with _iproute("list addresses", netdev) as ipr:
        names = {m["index"]: m.get("IFLA_IFNAME") for m in ipr.get_links()}
        kwargs = {"index": _index(ipr, netdev)} if netdev else {}
        return [_address(m, names) for m in ipr.get_addr(**kwargs)]


def set_link(netdev: str, up: bool | None = None, mtu: int | None = None) -> LinkReply:
    """Set ``netdev`` up/down and/or its mtu; returns the link as it was before."""
    with _iproute("set link", netdev) as ipr:
        idx = _index(ipr, netdev)
        before = _link(ipr.get_links(idx)[0])
        if mtu is not None:
            ipr.link("set", index=idx, mtu=int(mtu))
        if up is not None:
            ipr.link("set", index=idx, state="up" if up else "down")
        return before


_IFA_F_NODAD = 0x02  # include/uapi/linux/if_addr.h


def _interface(address: str) -> ipaddress.IPv4Interface | ipaddress.IPv6Interface:
    try:
        return ipaddress.ip_interface(address)
    except ValueError as e:
        raise OpError("bad_params", f"not an address with prefix: {address!r} ({e})") from None


def _change_address(command: Literal["add", "del"], what: str, netdev: str, address: str) -> None:
    """``ip address {command}`` of ``address`` on ``netdev``; ``what`` names it in errors."""
    iface = _interface(address)
    # An IPv6 address is added without duplicate address detection: DAD keeps it
    # "tentative" for dad_transmits x retrans_timer (1 s by default, RFC 4862 5.4), and
    # binding a tentative address fails (EADDRNOTAVAIL), which a CM listen right after
    # pair setup would meet.  The data link is a point-to-point cable hil owns.
    flags = {"flags": _IFA_F_NODAD} if command == "add" and iface.version == 6 else {}
    with _iproute(f"{what} address {iface}", netdev) as ipr:
        ipr.addr(
            command,
            index=_index(ipr, netdev),
            address=str(iface.ip),
            prefixlen=iface.network.prefixlen,
            **flags,
        )


def add_address(netdev: str, address: str) -> None:
    """Add ``address`` (``A.B.C.D/prefix`` or IPv6) to ``netdev``."""
    _change_address("add", "add", netdev, address)


def delete_address(netdev: str, address: str) -> None:
    """Remove ``address`` from ``netdev``."""
    _change_address("del", "delete", netdev, address)


def flush_addresses(netdev: str, family: int | None = None) -> list[AddressReply]:
    """Remove every (or every IPv4 / IPv6) address of ``netdev``; returns them."""
    removed = [a for a in addresses(netdev) if family in (None, a["family"])]
    for a in removed:
        delete_address(netdev, a["address"])
    return removed


def wait_link(
    netdev: str, timeout: float, operstate: str | None = None, carrier: bool | None = None
) -> LinkReply:
    """Poll ``netdev`` until it has ``operstate`` and/or ``carrier``; returns it."""
    deadline = time.monotonic() + timeout
    while True:
        seen = link(netdev)
        if operstate in (None, seen["operstate"]) and carrier in (None, seen["carrier"]):
            return seen
        if time.monotonic() >= deadline:
            want = ", ".join(
                f"{k}={v}"
                for k, v in (("operstate", operstate), ("carrier", carrier))
                if v is not None
            )
            raise OpError(
                "wait_timeout",
                f"{netdev} did not reach {want} within {timeout:g}s: "
                f"seen operstate={seen['operstate']} carrier={seen['carrier']} up={seen['up']}",
                seen=seen,
            )
        time.sleep(_POLL_INTERVAL)


def add_link(
    name: str,
    kind: str,
    peer: str | None = None,
    mac: str | None = None,
    peer_mac: str | None = None,
) -> LinkReply:
    """Create a virtual link (``dummy``, or ``veth`` with ``peer``); returns it.

    ``mac`` and ``peer_mac`` are set in the same request that creates the link: a MAC
    given later leaves a moment in which udev's persistent MAC policy may replace the
    kernel's random one (a guest's udev did), and an RDMA device made on the link in that
    moment keeps the old MAC as its GID.
    """
    extra: dict[str, object] = {"address": mac} if mac else {}
    if peer:
        extra["peer"] = {"ifname": peer, "address": peer_mac} if peer_mac else peer
    with _iproute(f"add {kind} link", name) as ipr:
        ipr.link("add", ifname=name, kind=kind, **extra)
    return link(name)


def delete_link(name: str) -> None:
    """Delete the link ``name`` (a veth takes its peer with it)."""
    with _iproute("delete link", name) as ipr:
        ipr.link("del", index=_index(ipr, name))


METHODS: dict[MethodName, Callable[..., object]] = {
    "links": links,
    "link": link,
    "addresses": addresses,
    "set_link": set_link,
    "add_address": add_address,
    "delete_address": delete_address,
    "flush_addresses": flush_addresses,
    "wait_link": wait_link,
    "add_link": add_link,
    "delete_link": delete_link,
}
