"""Validate a link's ``impair:``: where its path can be impaired (docs/impairment.md).

Called by :mod:`hil.inventory.links` with the hosts known, so that a ``netem`` on a
port whose RNIC offloads TCP, a ``middlebox`` that does not sit between the link's
two ends and a ``command``'s unknown template fields are refused when the inventory
is read, not when a test finds its impairment had no effect.
"""

from __future__ import annotations

from collections.abc import Mapping

import yaml

from hil.inventory.model import (
    HOST_TCP_DRIVERS,
    IMPAIR_FIELDS,
    IMPAIR_MODES,
    Host,
    ImpairSpec,
    LinkEnd,
)
from hil.inventory.nodes import (
    NAME,
    NAME_WHAT,
    NETDEV,
    NETDEV_WHAT,
    At,
    choice,
    entries,
    fields,
    given,
    known,
    matching,
)
from hil.inventory.templates import argv_template, template_vars, uses

# Per mode: (allowed keys, required keys).  ``impair: netem`` and ``impair: none``
# (plain words) are ``{mode: netem}`` and ``{mode: none}``.
IMPAIR_KEYS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "netem": (("mode",), ()),
    "middlebox": (("mode", "host", "toward"), ("host", "toward")),
    "command": (
        ("mode", "controller", "apply", "clear", "vars"),
        ("controller", "apply", "clear"),
    ),
    "none": (("mode",), ()),
}

# Why host netem cannot impair an offloading RNIC's traffic, with the driver source that
# shows its TCP runs on the card (Linux 6.1).
OFFLOAD_SOURCES = {
    "iw_cxgb4": "iw_cxgb4 opens each connection by a CPL_ACT_OPEN_REQ to the adapter, "
    "drivers/infiniband/hw/cxgb4/cm.c send_connect",
    "irdma": "irdma sends its SYN through its own ILQ queue on the device, "
    "drivers/infiniband/hw/irdma/cm.c irdma_send_syn",
}
MIDDLEBOX_FORM = "{mode: middlebox, host: HOST, toward: {END_A: NETDEV, END_B: NETDEV}}"


def default_impair(hosts: Mapping[str, Host], ends: tuple[LinkEnd, LinkEnd]) -> ImpairSpec:
    """A link's impairment point when ``impair:`` is absent: ``netem`` on its ends when both
    run TCP in the host kernel, else ``none``."""
    host_tcp = all(_driver(hosts, e) in HOST_TCP_DRIVERS for e in ends)
    return ImpairSpec(mode="netem" if host_tcp else "none")


def parse_impair(at: At, hosts: Mapping[str, Host], ends: tuple[LinkEnd, LinkEnd]) -> ImpairSpec:
    """The ``impair:`` at ``at`` of the link whose ends are ``ends``."""
    if isinstance(at.node, yaml.ScalarNode):
        mode = choice(at, ("netem", "none"))
    else:
        found = entries(at)
        if not given(found, "mode"):
            raise at.error(f"missing required key 'mode' (one of: {', '.join(IMPAIR_MODES)})")
        mode = choice(found["mode"], IMPAIR_MODES)
    if mode == "netem":
        _check_host_tcp(at, hosts, ends)
        return ImpairSpec(mode="netem")
    if mode == "none":
        return ImpairSpec(mode="none")
    allowed, required = IMPAIR_KEYS[mode]
    f = fields(at, allowed, ("mode", *required))
    if mode == "middlebox":
        return _middlebox(f, hosts, ends)
    return _command(f, hosts)


def _driver(hosts: Mapping[str, Host], end: LinkEnd) -> str:
    return hosts[end.host].rnic(end.port).driver


def _check_host_tcp(at: At, hosts: Mapping[str, Host], ends: tuple[LinkEnd, LinkEnd]) -> None:
    """Refuse host netem on a port whose RNIC runs TCP itself: it would impair nothing."""
    for end in ends:
        driver = _driver(hosts, end)
        if driver in HOST_TCP_DRIVERS:
            continue
        source = OFFLOAD_SOURCES.get(driver, f"{driver} is not a host-TCP driver")
        raise at.error(
            f"impair mode 'netem' cannot impair this link: {end} uses {driver}, whose RNIC "
            f"runs TCP itself ({source}), so its iWARP segments never pass the host's qdiscs "
            f"and netem there changes nothing; put a Linux host on the cable instead: "
            f"impair: {MIDDLEBOX_FORM}"
        )


def _host_name(at: At, hosts: Mapping[str, Host]) -> str:
    name = matching(at, NAME, NAME_WHAT)
    if name not in hosts:
        raise at.error(f"no host {name!r} in this inventory ({known(hosts)})")
    return name


def _middlebox(
    f: dict[str, At], hosts: Mapping[str, Host], ends: tuple[LinkEnd, LinkEnd]
) -> ImpairSpec:
    """A middlebox must be a third host with one netdev toward each of the link's ends."""
    host = _host_name(f["host"], hosts)
    if host in (e.host for e in ends):
        raise f["host"].error(
            f"middlebox {host!r} is one of the link's ends; a middlebox is a third host "
            f"bridging {ends[0]} and {ends[1]}"
        )
    toward = entries(f["toward"])
    names = {str(e): e for e in ends}
    for key, value in toward.items():
        if key not in names:
            raise value.error(
                f"{key!r} is not an end of this link: middlebox {host!r} must bridge its two "
                f"ends ({ends[0]}, {ends[1]}), one netdev toward each"
            )
    missing = [n for n in names if n not in toward]
    if missing:
        raise f["toward"].error(
            f"middlebox {host!r} names no netdev toward {', '.join(missing)}: it must bridge "
            f"both ends of the link ({ends[0]}, {ends[1]})"
        )
    netdevs = tuple((names[k], matching(v, NETDEV, NETDEV_WHAT)) for k, v in toward.items())
    if netdevs[0][1] == netdevs[1][1]:
        raise f["toward"].error(
            f"middlebox {host!r} faces both ends on {netdevs[0][1]}; a bridge between the "
            "ends has one netdev toward each"
        )
    return ImpairSpec(mode="middlebox", host=host, toward=netdevs)


def _command(f: dict[str, At], hosts: Mapping[str, Host]) -> ImpairSpec:
    variables = template_vars(f["vars"], IMPAIR_FIELDS) if given(f, "vars") else ()
    names = {k for k, _ in variables} | set(IMPAIR_FIELDS)
    what = "fields"  # its vars and the ones hil fills
    apply = argv_template(f["apply"], names, what)
    clear = argv_template(f["clear"], names, what)
    if not uses(apply, "netem"):
        raise f["apply"].error("apply must pass the impairment: {netem} (tc-netem(8) words)")
    for key, argv in (("apply", apply), ("clear", clear)):
        if not uses(argv, "direction"):
            raise f[key].error(
                f"{key} must name {{direction}}: hil impairs each direction on its own"
            )
    return ImpairSpec(
        mode="command",
        controller=_host_name(f["controller"], hosts),
        apply=apply,
        clear=clear,
        vars=variables,
    )
