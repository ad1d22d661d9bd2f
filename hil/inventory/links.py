"""Validate the ``links:`` section: two ends on two hosts, one link per port, the pull
modes, the capture point, the impairment point (:mod:`hil.inventory.impairs`) and the
reference peer's hosts (:mod:`hil.inventory.peers`).

Called by ``hil.inventory.loader`` once the hosts are known, so that every
``HOST:PORT`` end, pull ``end`` and ``controller``, and capture ``host`` or
``controller`` is checked against them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

import yaml

from hil.inventory.devlinkparams import DEVLINK_DRIVER, check_devlink_value, devlink_param
from hil.inventory.impairs import default_impair, parse_impair
from hil.inventory.model import (
    CAPTURE_FETCH_FIELDS,
    CAPTURE_FIELDS,
    CAPTURE_MODES,
    HOST_TCP_DRIVERS,
    PULL_MODES,
    CaptureSpec,
    Host,
    Link,
    LinkEnd,
    PinnedDevlink,
    PinnedParam,
    Pull,
)
from hil.inventory.modparams import INT_MAX, INT_MIN, ModuleParam, check_settable, module_param
from hil.inventory.nodes import (
    NAME,
    NAME_WHAT,
    NETDEV,
    NETDEV_WHAT,
    At,
    boolean,
    check_name,
    choice,
    describe,
    entries,
    fields,
    file_path,
    given,
    integer,
    known,
    matching,
    sequence,
    tags,
    text,
)
from hil.inventory.peers import parse_peers
from hil.inventory.templates import argv_template, template_vars, uses

LINK_KEYS = ("ends", "tags", "pull", "capture", "impair", "module_params", "devlink_params", "peer")
# Per pull mode: (allowed keys, required keys).  ``end`` is allowed for every
# mode: admin and blackhole act on it (default: the first end); for carrier
# and command it is optional and names the side whose carrier is affected.
PULL_KEYS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "admin": (("mode", "end"), ()),
    "blackhole": (("mode", "end"), ()),
    "carrier": (("mode", "end", "qmp", "netdev"), ("qmp", "netdev")),
    "command": (("mode", "end", "controller", "down", "up", "vars"), ("controller", "down", "up")),
}

# Per capture mode, the same.  ``capture: none`` (a plain word) is ``{mode: none}``.
CAPTURE_KEYS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "ends": (("mode",), ()),
    "host": (("mode", "host", "netdev"), ("host", "netdev")),
    "command": (
        ("mode", "controller", "start", "stop", "fetch", "vars"),
        ("controller", "start", "stop", "fetch"),
    ),
    "none": (("mode",), ()),
}

_ACTS_ON_AN_END = ("admin", "blackhole")
_INT = "tag:yaml.org,2002:int"
_QEMU_ID = re.compile(r"[A-Za-z][A-Za-z0-9_.-]*")
_END = re.compile(r"([^:\s]+):([^:\s]+)")


def parse_links(at: At, hosts: Mapping[str, Host], base: Path) -> dict[str, Link]:
    """The links of the ``links:`` mapping at ``at``; paths in them are relative to ``base``.

    Besides each link on its own, this checks that no RNIC port is an end of
    two links: a port takes one cable, so the second link is a copy-paste slip
    or a stale entry, and a run on it would configure and pull the other
    link's port.
    """
    reader = _LinkReader(hosts, base)
    return {name: reader.link(name, link) for name, link in entries(at).items()}


class _LinkReader:
    def __init__(self, hosts: Mapping[str, Host], base: Path) -> None:
        self.hosts = hosts
        self.base = base
        # Each port already an end of a link read so far: (that link, the end's line).
        self.cabled: dict[LinkEnd, tuple[str, int]] = {}

    def link(self, name: str, at: At) -> Link:
        check_name(at, name)
        f = fields(at, LINK_KEYS, required=("ends",))
        ends = sequence(f["ends"])
        if len(ends) != 2:
            raise f["ends"].error(f"a link has exactly two ends, got {len(ends)}")
        a, b = (self._end(e) for e in ends)
        if a.host == b.host:
            raise f["ends"].error(f"both ends are on host {a.host!r}; a link joins two hosts")
        for end, end_at in ((a, ends[0]), (b, ends[1])):
            if end in self.cabled:
                other, line = self.cabled[end]
                raise end_at.error(
                    f"RNIC port {end} is on two links, {other!r} (line {line}) and {name!r}; "
                    "a port takes one cable"
                )
        for end, end_at in ((a, ends[0]), (b, ends[1])):
            self.cabled[end] = (name, end_at.line)
        self._distinct_addresses(f["ends"], a, b)
        pulls: list[Pull] = []
        lines: dict[str, int] = {}
        for item in sequence(f["pull"]) if given(f, "pull") else []:
            pull = self._pull(item, (a, b))
            self._check_offload(item, pull)
            if pull.mode in lines:
                raise item.error(
                    f"duplicate pull mode {pull.mode!r} (first at line {lines[pull.mode]})"
                )
            lines[pull.mode] = item.line
            pulls.append(pull)
        capture = self._capture(f["capture"]) if given(f, "capture") else CaptureSpec()
        impair = (
            parse_impair(f["impair"], self.hosts, (a, b))
            if given(f, "impair")
            else default_impair(self.hosts, (a, b))
        )
        params = (
            self._module_params(f["module_params"], (a, b)) if given(f, "module_params") else ()
        )
        devlink = (
            self._devlink_params(f["devlink_params"], (a, b)) if given(f, "devlink_params") else ()
        )
        return Link(
            name=name,
            a=a,
            b=b,
            pulls=tuple(pulls),
            tags=tags(f.get("tags")),
            capture=capture,
            impair=impair,
            module_params=params,
            devlink_params=devlink,
            peers=parse_peers(f["peer"], self.hosts, (a, b)) if given(f, "peer") else (),
        )

    def _distinct_addresses(self, at: At, a: LinkEnd, b: LinkEnd) -> None:
        """Refuse a link whose two ends have the same IPv6 address: neither could reach the
        other (the IPv4 ``address`` is left as it was: inventories predate this check)."""
        ra, rb = (self.hosts[e.host].rnic(e.port) for e in (a, b))
        if ra.address6 is not None and rb.address6 is not None and ra.address6.ip == rb.address6.ip:
            raise at.error(
                f"both ends have the address6 {ra.address6.ip}; each end of a link needs its own"
            )

    def _module_params(self, at: At, ends: tuple[LinkEnd, LinkEnd]) -> tuple[PinnedParam, ...]:
        """``module_params:``: driver -> {parameter: value}, each known and settable at runtime.

        A driver must be one of the link's ports' drivers: pair setup sets its
        parameters on the hosts whose port uses it.
        """
        drivers = {self.hosts[e.host].rnic(e.port).driver for e in ends}
        pinned: list[PinnedParam] = []
        for driver, params in entries(at).items():
            if driver not in drivers:
                raise params.error(
                    f"driver {driver!r} is not the driver of this link's ports "
                    f"({', '.join(sorted(drivers))})"
                )
            for name, value in entries(params).items():
                try:
                    param = module_param(driver, name)
                except KeyError as e:
                    raise value.error(str(e.args[0])) from None
                pinned.append(PinnedParam(driver, name, _param_value(value, param)))
        return tuple(pinned)

    def _devlink_params(self, at: At, ends: tuple[LinkEnd, LinkEnd]) -> tuple[PinnedDevlink, ...]:
        """``devlink_params:``: parameter -> value, each a runtime one of ice's, on a link
        with an irdma end (pair setup sets them on each irdma end's PCI function)."""
        drivers = {self.hosts[e.host].rnic(e.port).driver for e in ends}
        found = entries(at)  # an empty mapping (inventory_document's for any link) pins nothing
        if found and DEVLINK_DRIVER not in drivers:
            raise at.error(
                f"devlink_params are set on irdma ports' PCI functions; this link's ports "
                f"run {', '.join(sorted(drivers))}"
            )
        pinned: list[PinnedDevlink] = []
        for name, value in found.items():
            given_value = _devlink_value(value)
            try:
                checked = check_devlink_value(devlink_param(name), given_value)
            except KeyError as e:
                raise value.error(str(e.args[0])) from None
            except ValueError as e:
                raise value.error(str(e)) from None
            pinned.append(PinnedDevlink(name, checked))
        return tuple(pinned)

    def _end(self, at: At) -> LinkEnd:
        value = text(at)
        m = _END.fullmatch(value)
        if not m:
            raise at.error(f"{value!r} is not HOST:PORT (like t6-a:p0)")
        host, port = m.groups()
        if host not in self.hosts:
            raise at.error(f"no host {host!r} in this inventory ({known(self.hosts)})")
        ports = [r.name for r in self.hosts[host].rnics]
        if port not in ports:
            raise at.error(f"host {host!r} has no RNIC port {port!r} ({known(ports, 'ports')})")
        return LinkEnd(host, port)

    def _pull(self, at: At, ends: tuple[LinkEnd, LinkEnd]) -> Pull:
        found = entries(at)
        if not given(found, "mode"):
            raise at.error(f"missing required key 'mode' (one of: {', '.join(PULL_MODES)})")
        mode = choice(found["mode"], PULL_MODES)
        allowed, required = PULL_KEYS[mode]
        f = fields(at, allowed, ("mode", *required))
        end = self._pull_end(f["end"], ends) if given(f, "end") else None
        if end is None and mode in _ACTS_ON_AN_END:
            end = ends[0]
        if mode == "carrier":
            return Pull(
                mode="carrier",
                end=end,
                qmp=file_path(f["qmp"], self.base),
                qmp_netdev=matching(f["netdev"], _QEMU_ID, "a QEMU netdev id"),
            )
        if mode == "command":
            return self._command_pull(f, end)
        return Pull(mode=mode, end=end)  # type: ignore[arg-type]

    def _check_offload(self, at: At, pull: Pull) -> None:
        """Refuse a ``blackhole`` pull on a port whose RNIC offloads TCP: it would pull nothing."""
        if pull.mode != "blackhole" or pull.end is None:
            return
        driver = self.hosts[pull.end.host].rnic(pull.end.port).driver
        if driver not in HOST_TCP_DRIVERS:
            raise at.error(
                f"pull mode 'blackhole' cannot pull this link: {pull.end} uses {driver}, "
                "whose RNIC runs TCP itself (offloaded), so host filters (nftables) never see "
                "its iWARP traffic and the connection stays up; use 'admin' (the port's netdev "
                "set down) or 'command' (the switch port taken down)"
            )

    def _pull_end(self, at: At, ends: tuple[LinkEnd, LinkEnd]) -> LinkEnd:
        value = text(at)
        for end in ends:
            if str(end) == value:
                return end
        raise at.error(f"{value!r} is not an end of this link (ends: {ends[0]}, {ends[1]})")

    def _command_pull(self, f: dict[str, At], end: LinkEnd | None) -> Pull:
        variables = template_vars(f["vars"], ()) if given(f, "vars") else ()
        names = {k for k, _ in variables}
        return Pull(
            mode="command",
            end=end,
            controller=self._host_name(f["controller"]),
            down=argv_template(f["down"], names),
            up=argv_template(f["up"], names),
            vars=variables,
        )

    def _host_name(self, at: At) -> str:
        """An inventory host named at ``at``."""
        name = matching(at, NAME, NAME_WHAT)
        if name not in self.hosts:
            raise at.error(f"no host {name!r} in this inventory ({known(self.hosts)})")
        return name

    def _capture(self, at: At) -> CaptureSpec:
        if isinstance(at.node, yaml.ScalarNode):
            # ``capture: none``: the plain-word form of the modes that take no keys.
            return CaptureSpec(mode=choice(at, ("none", "ends")))  # type: ignore[arg-type]
        found = entries(at)
        if not given(found, "mode"):
            raise at.error(f"missing required key 'mode' (one of: {', '.join(CAPTURE_MODES)})")
        mode = choice(found["mode"], CAPTURE_MODES)
        allowed, required = CAPTURE_KEYS[mode]
        f = fields(at, allowed, ("mode", *required))
        if mode == "host":
            return CaptureSpec(
                mode="host",
                host=self._host_name(f["host"]),
                netdev=matching(f["netdev"], NETDEV, NETDEV_WHAT),
            )
        if mode == "command":
            return self._capture_command(f)
        return CaptureSpec(mode=mode)  # type: ignore[arg-type]

    def _capture_command(self, f: dict[str, At]) -> CaptureSpec:
        variables = template_vars(f["vars"], CAPTURE_FETCH_FIELDS) if given(f, "vars") else ()
        names = {k for k, _ in variables}
        what = "fields"  # its vars and the ones hil fills
        fetch = argv_template(f["fetch"], names | set(CAPTURE_FETCH_FIELDS), what)
        if not uses(fetch, "pcap"):
            raise f["fetch"].error(
                "fetch must write the capture to {pcap} (a file on the controller hil then "
                "copies and removes)"
            )
        return CaptureSpec(
            mode="command",
            controller=self._host_name(f["controller"]),
            start=argv_template(f["start"], names | set(CAPTURE_FIELDS), what),
            stop=argv_template(f["stop"], names | set(CAPTURE_FIELDS), what),
            fetch=fetch,
            vars=variables,
        )


def _devlink_value(at: At) -> str:
    """A devlink value as devlink prints it: YAML's true/false as ``true``/``false``."""
    if isinstance(at.node, yaml.ScalarNode) and at.node.tag == "tag:yaml.org,2002:bool":
        return "true" if boolean(at) else "false"
    return text(at)


def _param_value(at: At, param: ModuleParam) -> str:
    """A pinned parameter's value, as sysfs prints it."""
    try:
        check_settable(param)
    except ValueError as e:
        raise at.error(str(e)) from None
    if not isinstance(at.node, yaml.ScalarNode) or at.node.tag != _INT:
        raise at.error(
            f"{param.driver}.{param.name} is an {param.type}: expected an integer, "
            f"got {describe(at.node)}"
        )
    return str(integer(at, INT_MIN, INT_MAX))
