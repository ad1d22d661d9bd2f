"""Load and validate an inventory file into the dataclasses of ``model``.

The file is composed (not constructed) with PyYAML so that every node keeps
its line; each check raises ``InventoryError`` located as
``file:line: yaml.path: message``.  The first problem found is reported.
See docs/inventory.md for the format.
"""

from __future__ import annotations

import ipaddress
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import yaml

from hil.errors import InputError, InventoryError
from hil.inventory.links import parse_links
from hil.inventory.model import (
    FIRMWARE_POLICIES,
    Host,
    Inventory,
    IPInterface,
    Link,
    Rnic,
    SshConfig,
)
from hil.inventory.nodes import (
    NAME,
    NAME_WHAT,
    NETDEV,
    NETDEV_WHAT,
    At,
    boolean,
    check_name,
    choice,
    entries,
    fields,
    file_path,
    given,
    integer,
    known,
    matching,
    number,
    sequence,
    tags,
    text,
)
from hil.inventory.power import check_controller, parse_power
from hil.inventory.secret import ENV_NAME, Secret
from hil.inventory.thresholds import parse_section

SUPPORTED_VERSION = 1
HOST_KEY_POLICIES = ("strict", "accept-new")

TOP_KEYS = ("version", "hosts", "links", "thresholds")
HOST_KEYS = ("ssh", "python", "tags", "sysctls", "firmware_policy", "rnics", "power")
SSH_KEYS = (
    "host", "port", "user", "identity_file", "jump",
    "host_key_policy", "known_hosts", "sudo", "connect_timeout",
    "key_passphrase", "password",
)  # fmt: skip
RNIC_KEYS = (
    "name", "netdev", "driver", "rdma_device", "address",
    "mtu", "speed", "firmware", "fallback",
)  # fmt: skip
# Words that end up in an ssh or process argument list: no spaces, and no
# leading '-' so that inventory text can never be taken for an option.
_WORD = re.compile(r"[^\s-][^\s]*")
_DRIVER = re.compile(r"[a-z0-9_]+")
_SYSCTL = re.compile(r"[A-Za-z0-9_-]+(?:[./][A-Za-z0-9_-]+)*")

# A version ``firmware_policy: min`` can compare: dotted numbers, like 1.27.4.0.
FIRMWARE_VERSION = re.compile(r"[0-9]+(?:\.[0-9]+)*")

_SPEED_MAX = 10_000_000  # Mb/s: 10 Tb/s, far beyond any RNIC, catches unit slips


def load(path: str | os.PathLike[str]) -> Inventory:
    """Read, validate and return the inventory at ``path``.

    Raises ``InputError`` when the file cannot be read and ``InventoryError``
    (located ``file:line: yaml.path: message``) when it is not valid.
    """
    file = os.fspath(path)
    root = _compose(file, _read(file))
    return _Loader(file).inventory(root)


def inventory_path(path: str | os.PathLike[str] | None) -> str:
    """The file a ``--inventory`` option names, else ``$HIL_INVENTORY``; InputError if neither."""
    chosen = os.fspath(path) if path else os.environ.get("HIL_INVENTORY")
    if not chosen:
        raise InputError("no inventory: pass --inventory FILE or set HIL_INVENTORY")
    return chosen


def load_from_args(path: str | os.PathLike[str] | None) -> Inventory:
    """Load the inventory named by a ``--inventory`` option, else by ``$HIL_INVENTORY``."""
    return load(inventory_path(path))


def _read(file: str) -> str:
    try:
        with open(file, encoding="utf-8") as f:
            return f.read()
    except OSError as e:
        raise InputError(f"{file}: cannot read inventory: {e.strerror or e}") from None
    except UnicodeDecodeError as e:
        raise InputError(f"{file}: inventory is not UTF-8 text ({e.reason})") from None


def _compose(file: str, source: str) -> At:
    try:
        node = yaml.compose(source, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        line = mark.line + 1 if mark else None
        context = ""
        if e.context:
            started = f" started at line {e.context_mark.line + 1}" if e.context_mark else ""
            context = f" ({e.context}{started})"
        raise InventoryError(file, line, "", f"invalid YAML: {e.problem}{context}") from None
    except yaml.YAMLError as e:
        raise InventoryError(file, None, "", f"invalid YAML: {e}") from None
    if node is None:
        raise InventoryError(file, 1, "", "the file is empty (expected hosts: and links:)")
    return At(file, node.start_mark.line + 1, "", node)


@dataclass(frozen=True)
class _Checked:
    """A host, and the located ``jump`` and ``power`` values still to resolve."""

    host: Host
    jump: At | None
    power: At | None = None


class _Loader:
    """Builds an ``Inventory`` from one file's root node."""

    def __init__(self, file: str) -> None:
        self.file = file
        self.base = Path(os.path.abspath(file)).parent
        self.hosts: dict[str, Host] = {}

    def inventory(self, root: At) -> Inventory:
        top = fields(root, TOP_KEYS, required=("hosts",))
        if "version" in top:
            version = integer(top["version"], 0, 2**31)
            if version != SUPPORTED_VERSION:
                raise top["version"].error(
                    f"unsupported version {version} (this hil reads version {SUPPORTED_VERSION})"
                )
        checked = {name: self._host(name, at) for name, at in entries(top["hosts"]).items()}
        self.hosts = {name: c.host for name, c in checked.items()}
        for c in checked.values():
            self._check_jump(c)
            if c.power is not None and c.host.power is not None:
                check_controller(c.power, c.host.name, c.host.power, self.hosts)
        links: dict[str, Link] = {}
        if given(top, "links"):
            links = parse_links(top["links"], self.hosts, self.base)
        thresholds = parse_section(top["thresholds"]) if given(top, "thresholds") else ()
        return Inventory(path=Path(self.file), hosts=self.hosts, links=links, thresholds=thresholds)

    # -- hosts -------------------------------------------------------------

    def _host(self, name: str, at: At) -> _Checked:
        check_name(at, name)
        f = fields(at, HOST_KEYS, required=("ssh",))
        ssh, jump = self._ssh(f["ssh"])
        rnics = self._rnics(f.get("rnics"))
        readers: dict[str, Callable[[At], object]] = {"python": _interpreter}
        if given(f, "firmware_policy"):
            readers["firmware_policy"] = lambda a: _firmware_policy(a, f.get("rnics"), rnics)
        if given(f, "power"):
            readers["power"] = lambda a: parse_power(a, self.base)
        host = Host(
            name=name,
            ssh=ssh,
            tags=tags(f.get("tags")),
            rnics=rnics,
            sysctls=_sysctls(f.get("sysctls")),
            **_read_given(f, readers),  # type: ignore[arg-type]
        )
        return _Checked(host, jump, f["power"] if given(f, "power") else None)

    def _ssh(self, at: At) -> tuple[SshConfig, At | None]:
        f = fields(at, SSH_KEYS, required=("host",))
        readers: dict[str, Callable[[At], object]] = {
            "host": lambda a: matching(a, _WORD, "a host name, address or ssh alias"),
            "port": lambda a: integer(a, 1, 65535),
            "user": lambda a: matching(a, _WORD, "a user name"),
            "identity_file": lambda a: file_path(a, self.base),
            "jump": lambda a: matching(a, NAME, NAME_WHAT),
            "host_key_policy": lambda a: choice(a, HOST_KEY_POLICIES),
            "known_hosts": lambda a: file_path(a, self.base),
            "sudo": boolean,
            "connect_timeout": lambda a: number(a, 0.1, 3600),
            "key_passphrase": _secret,
            "password": _secret,
        }
        ssh = SshConfig(**_read_given(f, readers))  # type: ignore[arg-type]
        return ssh, f["jump"] if given(f, "jump") else None

    def _check_jump(self, c: _Checked) -> None:
        """``jump`` names another host, and following jumps never loops."""
        if c.jump is None:
            return
        seen = [c.host.name]
        hop = c.host.ssh.jump
        while hop is not None:
            if hop not in self.hosts:
                raise c.jump.error(f"no host {hop!r} in this inventory ({known(self.hosts)})")
            if hop in seen:
                raise c.jump.error(f"jump hosts loop: {' -> '.join([*seen, hop])}")
            seen.append(hop)
            hop = self.hosts[hop].ssh.jump

    def _rnics(self, at: At | None) -> tuple[Rnic, ...]:
        if at is None or at.is_null:
            return ()
        rnics: list[Rnic] = []
        lines: dict[str, int] = {}
        netdevs: dict[str, str] = {}
        for item in sequence(at):
            rnic = self._rnic(item)
            if rnic.name in lines:
                raise item.error(
                    f"duplicate RNIC port name {rnic.name!r} (first at line {lines[rnic.name]})"
                )
            if rnic.netdev in netdevs:
                raise item.error(
                    f"netdev {rnic.netdev!r} is already port {netdevs[rnic.netdev]!r} of this host"
                )
            lines[rnic.name] = item.line
            netdevs[rnic.netdev] = rnic.name
            rnics.append(rnic)
        return tuple(rnics)

    def _rnic(self, at: At) -> Rnic:
        f = fields(at, RNIC_KEYS, required=("name", "netdev", "driver"))
        readers: dict[str, Callable[[At], object]] = {
            "name": lambda a: matching(a, NAME, NAME_WHAT),
            "netdev": lambda a: matching(a, NETDEV, NETDEV_WHAT),
            "driver": lambda a: matching(a, _DRIVER, "a driver name (like iw_cxgb4 or siw)"),
            "rdma_device": lambda a: matching(a, NAME, "an RDMA device name (like cxgb4_0)"),
            "address": _interface,
            "mtu": lambda a: integer(a, 68, 65535),
            "speed": lambda a: integer(a, 1, _SPEED_MAX),
            "firmware": text,
            "fallback": lambda a: choice(a, ("siw",)),
        }
        return Rnic(**_read_given(f, readers))  # type: ignore[arg-type]


def _read_given(f: dict[str, At], readers: dict[str, Callable[[At], object]]) -> dict[str, object]:
    """Each given key read by its reader; absent or null keys keep the dataclass default."""
    return {key: read(f[key]) for key, read in readers.items() if given(f, key)}


def _firmware_policy(at: At, rnics_at: At | None, rnics: tuple[Rnic, ...]) -> str:
    """A host's ``firmware_policy``: it needs a port naming ``firmware``, and ``min``
    needs versions it can compare."""
    policy = choice(at, FIRMWARE_POLICIES)
    named = [(i, r) for i, r in enumerate(rnics) if r.firmware is not None]
    if not named:
        raise at.error(
            "firmware_policy says how to compare a port's firmware with what the card runs, "
            "but no RNIC port of this host names firmware; add firmware to a port or drop "
            "firmware_policy"
        )
    if policy == "min" and rnics_at is not None:
        for i, rnic in named:
            if not FIRMWARE_VERSION.fullmatch(rnic.firmware or ""):
                where = entries(sequence(rnics_at)[i])["firmware"]
                raise where.error(
                    f"firmware_policy min compares dotted version numbers (like 1.27.4.0), "
                    f"got {rnic.firmware!r}"
                )
    return policy


def _secret(at: At) -> Secret:
    """``{env: NAME}`` (the value comes from the environment at connect time) or literal text."""
    if isinstance(at.node, yaml.MappingNode):
        name = text(fields(at, ("env",), required=("env",))["env"])
        if not ENV_NAME.fullmatch(name):
            raise at.error(f"{name!r} is not an environment variable name (like HIL_SSH_PASSWORD)")
        return Secret(env=name)
    value = text(at)
    if not value:
        raise at.error("expected a secret, got an empty string (or use {env: NAME})")
    return Secret(literal=value)


def _interpreter(at: At) -> str:
    return matching(at, _WORD, "an interpreter name or path")


def _interface(at: At) -> IPInterface:
    value = text(at)
    try:
        address = ipaddress.ip_interface(value)
    except ValueError:
        raise at.error(f"{value!r} is not an IP network") from None
    if "/" not in value:
        raise at.error(f"{value!r} has no prefix length (write ADDRESS/PREFIX, like {value}/24)")
    return address


def _sysctls(at: At | None) -> tuple[tuple[str, str], ...]:
    if at is None or at.is_null:
        return ()
    result = []
    for key, value in entries(at).items():
        if not _SYSCTL.fullmatch(key):
            raise value.error(f"{key!r} is not a sysctl name (like net.ipv4.tcp_retries2)")
        result.append((key, text(value)))
    return tuple(result)
