"""The host's methods (system.py, netlink.py, ethtool.py, rdma.py, kmsg.py on the
agent): their params and replies, and each declared as a :class:`Method`."""

from __future__ import annotations

from typing import Any, TypedDict

from .spec import Method

__all__ = [
    "NoParams", "PingReply", "RunParams", "RunReply", "SysctlGetParams", "SysctlSetParams",
    "NetdevParams", "AddressesParams", "SetLinkParams", "AddressParams", "FlushAddressesParams",
    "WaitLinkParams", "AddLinkParams", "NameParams", "AddSiwParams", "ResourcesParams",
    "ResourceRowsParams", "CursorParams", "LinkReply", "AddressReply", "DrvInfoReply",
    "RdmaDeviceReply", "RdmaLinkReply", "KmsgRecordReply", "KmsgReadReply", "PING", "RUN",
    "SYSCTL_GET", "SYSCTL_SET", "LINKS", "LINK", "ADDRESSES", "SET_LINK", "ADD_ADDRESS",
    "DELETE_ADDRESS", "FLUSH_ADDRESSES", "WAIT_LINK", "ADD_LINK", "DELETE_LINK", "ETHTOOL_DRVINFO",
    "RDMA_DEVICES", "RDMA_LINKS", "RDMA_ADD_SIW", "RDMA_DELETE_LINK", "RDMA_RESOURCES",
    "RDMA_RESOURCE_ROWS", "KMSG_CURSOR", "KMSG_READ", "KMSG_CLOSE",
]  # fmt: skip


class NoParams(TypedDict):
    """A method that takes no params (besides the request's timeout)."""


class PingReply(TypedDict):
    pid: int


class _RunRequired(TypedDict):
    argv: list[str]


class RunParams(_RunRequired, total=False):
    input: str | None


class RunReply(TypedDict):
    status: int
    stdout: str
    stderr: str


class SysctlGetParams(TypedDict):
    name: str


class SysctlSetParams(TypedDict):
    name: str
    value: str


class NetdevParams(TypedDict):
    netdev: str


class AddressesParams(TypedDict, total=False):
    netdev: str | None


class SetLinkParams(NetdevParams, total=False):
    up: bool | None
    mtu: int | None


class AddressParams(TypedDict):
    netdev: str
    address: str  # with prefix: 198.18.0.1/24


class FlushAddressesParams(NetdevParams, total=False):
    family: int | None  # 4, 6, or None for both


class WaitLinkParams(NetdevParams, total=False):
    operstate: str | None
    carrier: bool | None


class _AddLinkRequired(TypedDict):
    name: str
    kind: str


class AddLinkParams(_AddLinkRequired, total=False):
    peer: str | None
    mac: str | None
    peer_mac: str | None


class NameParams(TypedDict):
    name: str


class AddSiwParams(TypedDict):
    name: str
    netdev: str


class ResourcesParams(TypedDict, total=False):
    # of RESOURCE_TYPES; None for all.  The reply leaves out a type no device's summary
    # lists (an older kernel's): it is not counted, which is not 0.
    types: list[str] | None


class ResourceRowsParams(TypedDict):
    type: str  # one of RESOURCE_TYPES


class CursorParams(TypedDict):
    cursor: int


class LinkReply(TypedDict):
    """A network link as rtnetlink reports it."""

    name: str
    index: int
    mtu: int
    operstate: str  # UP, DOWN, LOWERLAYERDOWN, UNKNOWN, ...
    carrier: bool
    up: bool  # IFF_UP
    mac: str | None
    kind: str | None  # veth, dummy, ... (None for physical NICs)


class AddressReply(TypedDict):
    netdev: str
    address: str  # with prefix
    family: int  # 4 or 6
    scope: int  # 0 global, 253 link, 254 host


class DrvInfoReply(TypedDict):
    netdev: str
    driver: str
    version: str
    firmware: str
    bus_info: str


class RdmaDeviceReply(TypedDict):
    name: str
    index: int
    node_type: str | None
    fw: str | None
    node_guid: str | None


class RdmaLinkReply(TypedDict):
    device: str
    port: int
    state: str | None
    physical_state: str | None
    netdev: str | None


class KmsgRecordReply(TypedDict):
    seq: int
    usec: int  # since boot
    priority: int  # 0 emerg .. 7 debug
    facility: int
    message: str


class KmsgReadReply(TypedDict):
    records: list[KmsgRecordReply]
    lost: int  # records the ring buffer overwrote before they were read


_NONE = type(None)

PING = Method("ping", NoParams, PingReply)
RUN = Method("run", RunParams, RunReply)
SYSCTL_GET = Method("sysctl_get", SysctlGetParams, str)
SYSCTL_SET = Method("sysctl_set", SysctlSetParams, str)  # the old value
LINKS = Method("links", NoParams, list[LinkReply])
LINK = Method("link", NetdevParams, LinkReply)
ADDRESSES = Method("addresses", AddressesParams, list[AddressReply])
SET_LINK = Method("set_link", SetLinkParams, LinkReply)  # the link before the change
ADD_ADDRESS = Method("add_address", AddressParams, _NONE)
DELETE_ADDRESS = Method("delete_address", AddressParams, _NONE)
FLUSH_ADDRESSES = Method("flush_addresses", FlushAddressesParams, list[AddressReply])
WAIT_LINK = Method("wait_link", WaitLinkParams, LinkReply)
ADD_LINK = Method("add_link", AddLinkParams, LinkReply)
DELETE_LINK = Method("delete_link", NameParams, _NONE)
ETHTOOL_DRVINFO = Method("ethtool_drvinfo", NetdevParams, DrvInfoReply)
RDMA_DEVICES = Method("rdma_devices", NoParams, list[RdmaDeviceReply])
RDMA_LINKS = Method("rdma_links", NoParams, list[RdmaLinkReply])
RDMA_ADD_SIW = Method("rdma_add_siw", AddSiwParams, _NONE)
RDMA_DELETE_LINK = Method("rdma_delete_link", NameParams, _NONE)
RDMA_RESOURCES = Method("rdma_resources", ResourcesParams, dict[str, int])
# The rows of ``rdma -j resource show TYPE`` as the host's iproute2 prints them: their keys
# differ between versions (a cm_id's port in ``src-port`` or in ``src-addr``).
RDMA_RESOURCE_ROWS = Method("rdma_resource_rows", ResourceRowsParams, list[dict[str, Any]])
KMSG_CURSOR = Method("kmsg_cursor", NoParams, int)
KMSG_READ = Method("kmsg_read", CursorParams, KmsgReadReply)
KMSG_CLOSE = Method("kmsg_close", CursorParams, _NONE)
