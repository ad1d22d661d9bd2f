"""Inventory objects as plain JSON-safe data.

``inventory_document`` mirrors the YAML format (docs/inventory.md), so its
``hosts`` and ``links`` load back into an equal ``Inventory`` (but for a
literal SSH secret, which shows as ``<secret>``, never its value); every
optional field is present (``null`` when unset) so readers need no
defaults.  ``pair_document`` is the short form other commands print for a
pair (``hil reserve --json``, ``hil status --json``).
"""

from __future__ import annotations

from typing import Any

from hil.inventory.model import (
    CaptureSpec,
    Host,
    ImpairSpec,
    Inventory,
    Link,
    Pair,
    PeerSpec,
    Power,
    Pull,
    Rnic,
    params_by_driver,
)


def inventory_document(inventory: Inventory, pairs: list[Pair] | None = None) -> dict[str, Any]:
    """``version``, ``hosts``, ``links`` and ``pairs`` (all pairs unless given)."""
    chosen = inventory.pairs() if pairs is None else pairs
    return {
        "version": 1,
        "hosts": {name: _host(h) for name, h in inventory.hosts.items()},
        "links": {name: _link(lk) for name, lk in inventory.links.items()},
        "pairs": [pair_document(p) for p in chosen],
    }


def pair_document(pair: Pair) -> dict[str, Any]:
    """A pair's name, hosts, ends, tags and the pull modes it offers."""
    link = pair.link
    return {
        "name": pair.name,
        "hosts": [pair.host_a.name, pair.host_b.name],
        "ends": [str(link.a), str(link.b)],
        "tags": list(link.tags),
        "pulls": [p.mode for p in link.pulls],
    }


def _host(host: Host) -> dict[str, Any]:
    ssh = host.ssh
    return {
        "ssh": {
            "host": ssh.host,
            "port": ssh.port,
            "user": ssh.user,
            "identity_file": ssh.identity_file,
            "jump": ssh.jump,
            "host_key_policy": ssh.host_key_policy,
            "known_hosts": ssh.known_hosts,
            "sudo": ssh.sudo,
            "connect_timeout": ssh.connect_timeout,
            # Never the value: {"env": NAME}, or "<secret>" for a literal.
            "key_passphrase": ssh.key_passphrase.document() if ssh.key_passphrase else None,
            "password": ssh.password.document() if ssh.password else None,
        },
        "python": host.python,
        "tags": list(host.tags),
        "sysctls": dict(host.sysctls),
        # null where no port names firmware: the policy means nothing there.
        "firmware_policy": (host.firmware_policy if any(r.firmware for r in host.rnics) else None),
        "rnics": [_rnic(r) for r in host.rnics],
        "power": _power(host.power) if host.power else None,
    }


def _power(power: Power) -> dict[str, Any]:
    doc: dict[str, Any] = {"mode": power.mode, "recover": power.recover}
    if power.mode == "qmp":
        doc.update(qmp=power.qmp, lab=power.lab)
    else:
        doc.update(controller=power.controller, vars=dict(power.vars))
        # null for an action the entry does not give (an empty list would not load back).
        doc.update({a: list(getattr(power, a)) or None for a in ("cycle", "on", "off")})
    return doc


def _rnic(rnic: Rnic) -> dict[str, Any]:
    return {
        "name": rnic.name,
        "netdev": rnic.netdev,
        "driver": rnic.driver,
        "rdma_device": rnic.rdma_device,
        "address": str(rnic.address) if rnic.address is not None else None,
        "address6": str(rnic.address6) if rnic.address6 is not None else None,
        "mtu": rnic.mtu,
        "speed": rnic.speed,
        "firmware": rnic.firmware,
        "fallback": rnic.fallback,
    }


def _link(link: Link) -> dict[str, Any]:
    return {
        "ends": [str(link.a), str(link.b)],
        "tags": list(link.tags),
        "pull": [_pull(p) for p in link.pulls],
        "capture": _capture(link.capture),
        "impair": _impair(link.impair),
        "module_params": {
            driver: {name: int(value) for name, value in params.items()}
            for driver, params in params_by_driver(link.module_params).items()
        },
        "devlink_params": {p.name: _devlink_yaml(p.value) for p in link.devlink_params},
        "peer": [_peer(p) for p in link.peers],
    }


def _devlink_yaml(value: str) -> bool | str:
    """A pinned devlink value as the YAML writes it: a bool's as true/false."""
    return {"true": True, "false": False}.get(value, value)


def _peer(peer: PeerSpec) -> dict[str, Any]:
    return {
        "host": peer.host,
        "source": str(peer.source) if peer.source is not None else None,
        "source6": str(peer.source6) if peer.source6 is not None else None,
    }


def _pull(pull: Pull) -> dict[str, Any]:
    doc: dict[str, Any] = {"mode": pull.mode, "end": str(pull.end) if pull.end else None}
    if pull.mode == "carrier":
        doc.update(qmp=pull.qmp, netdev=pull.qmp_netdev)
    elif pull.mode == "command":
        doc.update(
            controller=pull.controller,
            down=list(pull.down),
            up=list(pull.up),
            vars=dict(pull.vars),
        )
    return doc


def _capture(capture: CaptureSpec) -> dict[str, Any]:
    doc: dict[str, Any] = {"mode": capture.mode}
    if capture.mode == "host":
        doc.update(host=capture.host, netdev=capture.netdev)
    elif capture.mode == "command":
        doc.update(
            controller=capture.controller,
            start=list(capture.start),
            stop=list(capture.stop),
            fetch=list(capture.fetch),
            vars=dict(capture.vars),
        )
    return doc


def _impair(impair: ImpairSpec) -> dict[str, Any]:
    doc: dict[str, Any] = {"mode": impair.mode}
    if impair.mode == "middlebox":
        doc.update(host=impair.host, toward={str(e): n for e, n in impair.toward})
    elif impair.mode == "command":
        doc.update(
            controller=impair.controller,
            apply=list(impair.apply),
            clear=list(impair.clear),
            vars=dict(impair.vars),
        )
    return doc
