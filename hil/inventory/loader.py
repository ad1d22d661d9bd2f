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
import string
from dataclasses import dataclass
from pathlib import Path

import yaml

from hil.errors import InputError, InventoryError
from hil.inventory.model import (
    PULL_MODES,
    Host,
    Inventory,
    IPInterface,
    Link,
    LinkEnd,
    Pull,
    Rnic,
    SshConfig,
)
from hil.inventory.nodes import (
    At,
    boolean,
    choice,
    entries,
    fields,
    integer,
    matching,
    number,
    sequence,
    text,
)

SUPPORTED_VERSION = 1

TOP_KEYS = ("version", "hosts", "links")
HOST_KEYS = ("ssh", "python", "tags", "sysctls", "rnics")
SSH_KEYS = (
    "host", "port", "user", "identity_file", "jump",
    "host_key_policy", "known_hosts", "sudo", "connect_timeout",
)  # fmt: skip
RNIC_KEYS = (
    "name", "netdev", "driver", "rdma_device", "address",
    "mtu", "speed", "firmware", "fallback",
)  # fmt: skip
LINK_KEYS = ("ends", "tags", "pull")
# Per pull mode: (allowed keys, required keys).  ``end`` is allowed for every
# mode so reports can say which side was pulled; it defaults to the first end.
PULL_KEYS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "admin": (("mode", "end"), ()),
    "blackhole": (("mode", "end"), ()),
    "carrier": (("mode", "end", "qmp", "netdev"), ("qmp", "netdev")),
    "command": (("mode", "end", "controller", "down", "up", "vars"), ("controller", "down", "up")),
}

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
_CHARS = "(letters, digits, '_', '.', '-'; starting with a letter or digit)"
_NAME_WHAT = f"a valid name {_CHARS}"
# Words that end up in an ssh or process argument list: no spaces, and no
# leading '-' so that inventory text can never be taken for an option.
_WORD = re.compile(r"[^\s-][^\s]*")
_NETDEV = re.compile(r"(?!\.\.?$)[^\s/:]{1,15}")
_DRIVER = re.compile(r"[a-z0-9_]+")
_SYSCTL = re.compile(r"[A-Za-z0-9_-]+(?:[./][A-Za-z0-9_-]+)*")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_QEMU_ID = re.compile(r"[A-Za-z][A-Za-z0-9_.-]*")
_END = re.compile(r"([^:\s]+):([^:\s]+)")

_SPEED_MAX = 10_000_000  # Mb/s: 10 Tb/s, far beyond any RNIC, catches unit slips


def load(path: str | os.PathLike[str]) -> Inventory:
    """Read, validate and return the inventory at ``path``.

    Raises ``InputError`` when the file cannot be read and ``InventoryError``
    (located ``file:line: yaml.path: message``) when it is not valid.
    """
    file = os.fspath(path)
    root = _compose(file, _read(file))
    try:
        return _Loader(file).inventory(root)
    except RecursionError:
        # Only a YAML alias that contains itself nests this deep.
        raise InventoryError(file, None, "", "recursive YAML alias") from None


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
        context = f" ({e.context})" if e.context else ""
        raise InventoryError(file, line, "", f"invalid YAML: {e.problem}{context}") from None
    except yaml.YAMLError as e:
        raise InventoryError(file, None, "", f"invalid YAML: {e}") from None
    if node is None:
        raise InventoryError(file, 1, "", "the file is empty (expected hosts: and links:)")
    return At(file, node.start_mark.line + 1, "", node)


@dataclass(frozen=True)
class _Checked:
    """A host, and the located ``jump`` value still to resolve."""

    host: Host
    jump: At | None


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
        links: dict[str, Link] = {}
        if "links" in top and not top["links"].is_null:
            for name, at in entries(top["links"]).items():
                links[name] = self._link(name, at)
        return Inventory(path=Path(self.file), hosts=self.hosts, links=links)

    # -- hosts -------------------------------------------------------------

    def _host(self, name: str, at: At) -> _Checked:
        _check_name(at, name)
        f = fields(at, HOST_KEYS, required=("ssh",))
        ssh, jump = self._ssh(f["ssh"])
        host = Host(
            name=name,
            ssh=ssh,
            tags=_tags(f.get("tags")),
            rnics=self._rnics(f.get("rnics")),
            python=matching(f["python"], _WORD, "an interpreter name or path")
            if _given(f, "python")
            else "python3",
            sysctls=_sysctls(f.get("sysctls")),
        )
        return _Checked(host, jump)

    def _ssh(self, at: At) -> tuple[SshConfig, At | None]:
        f = fields(at, SSH_KEYS, required=("host",))
        defaults = SshConfig(host="")
        jump = f["jump"] if _given(f, "jump") else None
        ssh = SshConfig(
            host=matching(f["host"], _WORD, "a host name, address or ssh alias"),
            port=integer(f["port"], 1, 65535) if _given(f, "port") else defaults.port,
            user=matching(f["user"], _WORD, "a user name") if _given(f, "user") else defaults.user,
            identity_file=self._path(f["identity_file"]) if _given(f, "identity_file") else None,
            jump=matching(jump, _NAME, _NAME_WHAT) if jump else None,
            host_key_policy=choice(f["host_key_policy"], ("strict", "accept-new"))  # type: ignore[arg-type]
            if _given(f, "host_key_policy")
            else defaults.host_key_policy,
            known_hosts=self._path(f["known_hosts"]) if _given(f, "known_hosts") else None,
            sudo=boolean(f["sudo"]) if _given(f, "sudo") else defaults.sudo,
            connect_timeout=number(f["connect_timeout"], 0.1, 3600)
            if _given(f, "connect_timeout")
            else defaults.connect_timeout,
        )
        return ssh, jump

    def _check_jump(self, c: _Checked) -> None:
        """``jump`` names another host, and following jumps never loops."""
        if c.jump is None:
            return
        seen = [c.host.name]
        hop = c.host.ssh.jump
        while hop is not None:
            if hop not in self.hosts:
                raise c.jump.error(f"no host {hop!r} in this inventory ({_known(self.hosts)})")
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
        return Rnic(
            name=matching(f["name"], _NAME, _NAME_WHAT),
            netdev=matching(f["netdev"], _NETDEV, "a network interface name"),
            driver=matching(f["driver"], _DRIVER, "a driver name (like iw_cxgb4 or siw)"),
            rdma_device=matching(f["rdma_device"], _NAME, "an RDMA device name (like cxgb4_0)")
            if _given(f, "rdma_device")
            else None,
            address=_interface(f["address"]) if _given(f, "address") else None,
            mtu=integer(f["mtu"], 68, 65535) if _given(f, "mtu") else None,
            speed=integer(f["speed"], 1, _SPEED_MAX) if _given(f, "speed") else None,
            firmware=text(f["firmware"]) if _given(f, "firmware") else None,
            fallback=choice(f["fallback"], ("siw",)) if _given(f, "fallback") else None,  # type: ignore[arg-type]
        )

    # -- links -------------------------------------------------------------

    def _link(self, name: str, at: At) -> Link:
        _check_name(at, name)
        f = fields(at, LINK_KEYS, required=("ends",))
        ends = sequence(f["ends"])
        if len(ends) != 2:
            raise f["ends"].error(f"a link has exactly two ends, got {len(ends)}")
        a, b = (self._end(e) for e in ends)
        if a.host == b.host:
            raise f["ends"].error(f"both ends are on host {a.host!r}; a link joins two hosts")
        pulls: list[Pull] = []
        modes: dict[str, int] = {}
        if _given(f, "pull"):
            for item in sequence(f["pull"]):
                pull = self._pull(item, (a, b))
                if pull.mode in modes:
                    raise item.error(
                        f"duplicate pull mode {pull.mode!r} (first at line {modes[pull.mode]})"
                    )
                modes[pull.mode] = item.line
                pulls.append(pull)
        return Link(name=name, a=a, b=b, pulls=tuple(pulls), tags=_tags(f.get("tags")))

    def _end(self, at: At) -> LinkEnd:
        value = text(at)
        m = _END.fullmatch(value)
        if not m:
            raise at.error(f"{value!r} is not HOST:PORT (like t6-a:p0)")
        host, port = m.groups()
        if host not in self.hosts:
            raise at.error(f"no host {host!r} in this inventory ({_known(self.hosts)})")
        ports = [r.name for r in self.hosts[host].rnics]
        if port not in ports:
            raise at.error(
                f"host {host!r} has no RNIC port {port!r} (ports: {', '.join(ports) or 'none'})"
            )
        return LinkEnd(host, port)

    def _pull(self, at: At, ends: tuple[LinkEnd, LinkEnd]) -> Pull:
        found = entries(at)
        if not _given(found, "mode"):
            raise at.error(f"missing required key 'mode' (one of: {', '.join(PULL_MODES)})")
        mode = choice(found["mode"], PULL_MODES)
        allowed, required = PULL_KEYS[mode]
        f = fields(at, allowed, ("mode", *required))
        end = ends[0]
        if _given(f, "end"):
            value = text(f["end"])
            named = [e for e in ends if str(e) == value]
            if not named:
                raise f["end"].error(
                    f"{value!r} is not an end of this link (ends: {ends[0]}, {ends[1]})"
                )
            end = named[0]
        if mode == "carrier":
            return Pull(
                mode="carrier",
                end=end,
                qmp=self._path(f["qmp"]),
                qmp_netdev=matching(f["netdev"], _QEMU_ID, "a QEMU netdev id"),
            )
        if mode == "command":
            return self._command_pull(f, end)
        return Pull(mode=mode, end=end)  # type: ignore[arg-type]

    def _command_pull(self, f: dict[str, At], end: LinkEnd) -> Pull:
        controller = matching(f["controller"], _NAME, _NAME_WHAT)
        if controller not in self.hosts:
            raise f["controller"].error(
                f"no host {controller!r} in this inventory ({_known(self.hosts)})"
            )
        variables = _vars(f["vars"]) if _given(f, "vars") else ()
        names = {k for k, _ in variables}
        return Pull(
            mode="command",
            end=end,
            controller=controller,
            down=_template(f["down"], names),
            up=_template(f["up"], names),
            vars=variables,
        )

    def _path(self, at: At) -> str:
        """A file path: ``~`` expanded, relative ones taken from the inventory's folder."""
        value = text(at)
        if not value:
            raise at.error("expected a file path, got an empty string")
        return os.path.normpath(self.base / os.path.expanduser(value))


def _given(f: dict[str, At], key: str) -> bool:
    """The key is present with a non-null value (null means "not set")."""
    return key in f and not f[key].is_null


def _check_name(at: At, name: str) -> None:
    if not _NAME.fullmatch(name):
        raise at.error(f"{name!r} is not {_NAME_WHAT}")


def _known(names: dict[str, object]) -> str:
    listed = sorted(names)
    shown = ", ".join(listed[:12]) + (", ..." if len(listed) > 12 else "")
    return f"hosts: {shown or 'none'}"


def _tags(at: At | None) -> tuple[str, ...]:
    if at is None or at.is_null:
        return ()
    return tuple(matching(item, _NAME, f"a valid tag {_CHARS}") for item in sequence(at))


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


def _vars(at: At) -> tuple[tuple[str, str], ...]:
    result = []
    for key, value in entries(at).items():
        if not _IDENT.fullmatch(key):
            raise value.error(f"{key!r} is not a variable name (letters, digits, '_')")
        result.append((key, text(value)))
    return tuple(result)


def _template(at: At, names: set[str]) -> tuple[str, ...]:
    """An argument list whose ``{name}`` fields must all be in ``names``."""
    items = sequence(at)
    if not items:
        raise at.error("expected a non-empty argument list")
    argv = []
    for item in items:
        arg = text(item)
        try:
            parsed = list(string.Formatter().parse(arg))
        except ValueError as e:
            raise item.error(f"bad template {arg!r}: {e} (write {{{{ for a literal brace)") from None
        for _, field, spec, conversion in parsed:
            if field is None:
                continue
            if not _IDENT.fullmatch(field) or spec or conversion:
                raise item.error(f"template field {{{field}}} must be a plain {{name}}")
            if field not in names:
                raise item.error(
                    f"template field {{{field}}} is not in vars "
                    f"(vars: {', '.join(sorted(names)) or 'none'})"
                )
        argv.append(arg)
    return tuple(argv)
