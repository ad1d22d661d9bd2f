"""The ``hosts:`` section of an inventory: each host, its SSH settings, and its jumps.

A host names how to reach it (``ssh:``; a password or key passphrase as
literal text or ``{env: NAME}``), its interpreter, tags, sysctls, RNIC ports
(:mod:`hil.inventory.rnics`) and power control (:mod:`hil.inventory.power`).
A ``jump`` or ``power`` controller names another host, so they are checked
once every host is read (:func:`check_jump`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import yaml

from hil.inventory.model import Host, SshConfig
from hil.inventory.nodes import (
    NAME,
    NAME_WHAT,
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
    read_given,
    tags,
    text,
)
from hil.inventory.power import parse_power
from hil.inventory.rnics import firmware_policy, parse_rnics
from hil.inventory.secret import ENV_NAME, Secret

HOST_KEY_POLICIES = ("strict", "accept-new")
HOST_KEYS = ("ssh", "python", "tags", "sysctls", "firmware_policy", "rnics", "power")
SSH_KEYS = (
    "host", "port", "user", "identity_file", "jump",
    "host_key_policy", "known_hosts", "sudo", "connect_timeout",
    "key_passphrase", "password",
)  # fmt: skip
# Words that end up in an ssh or process argument list: no spaces, and no
# leading '-' so that inventory text can never be taken for an option.
_WORD = re.compile(r"[^\s-][^\s]*")
_SYSCTL = re.compile(r"[A-Za-z0-9_-]+(?:[./][A-Za-z0-9_-]+)*")


@dataclass(frozen=True)
class CheckedHost:
    """A host, and the located ``jump`` and ``power`` values still to resolve."""

    host: Host
    jump: At | None
    power: At | None = None


def parse_host(name: str, at: At, base: Path) -> CheckedHost:
    """Host ``name``'s section; relative paths in it are taken from ``base``."""
    check_name(at, name)
    f = fields(at, HOST_KEYS, required=("ssh",))
    ssh, jump = _ssh(f["ssh"], base)
    rnics = parse_rnics(f.get("rnics"))
    readers: dict[str, Callable[[At], object]] = {"python": _interpreter}
    if given(f, "firmware_policy"):
        readers["firmware_policy"] = lambda a: firmware_policy(a, f.get("rnics"), rnics)
    if given(f, "power"):
        readers["power"] = lambda a: parse_power(a, base)
    host = Host(
        name=name,
        ssh=ssh,
        tags=tags(f.get("tags")),
        rnics=rnics,
        sysctls=_sysctls(f.get("sysctls")),
        **read_given(f, readers),  # type: ignore[arg-type]
    )
    return CheckedHost(host, jump, f["power"] if given(f, "power") else None)


def _ssh(at: At, base: Path) -> tuple[SshConfig, At | None]:
    f = fields(at, SSH_KEYS, required=("host",))
    readers: dict[str, Callable[[At], object]] = {
        "host": lambda a: matching(a, _WORD, "a host name, address or ssh alias"),
        "port": lambda a: integer(a, 1, 65535),
        "user": lambda a: matching(a, _WORD, "a user name"),
        "identity_file": lambda a: file_path(a, base),
        "jump": lambda a: matching(a, NAME, NAME_WHAT),
        "host_key_policy": lambda a: choice(a, HOST_KEY_POLICIES),
        "known_hosts": lambda a: file_path(a, base),
        "sudo": boolean,
        "connect_timeout": lambda a: number(a, 0.1, 3600),
        "key_passphrase": _secret,
        "password": _secret,
    }
    ssh = SshConfig(**read_given(f, readers))  # type: ignore[arg-type]
    return ssh, f["jump"] if given(f, "jump") else None


def check_jump(c: CheckedHost, hosts: Mapping[str, Host]) -> None:
    """``jump`` names another host, and following jumps never loops."""
    if c.jump is None:
        return
    seen = [c.host.name]
    hop = c.host.ssh.jump
    while hop is not None:
        if hop not in hosts:
            raise c.jump.error(f"no host {hop!r} in this inventory ({known(hosts)})")
        if hop in seen:
            raise c.jump.error(f"jump hosts loop: {' -> '.join([*seen, hop])}")
        seen.append(hop)
        hop = hosts[hop].ssh.jump


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


def _sysctls(at: At | None) -> tuple[tuple[str, str], ...]:
    if at is None or at.is_null:
        return ()
    result = []
    for key, value in entries(at).items():
        if not _SYSCTL.fullmatch(key):
            raise value.error(f"{key!r} is not a sysctl name (like net.ipv4.tcp_retries2)")
        result.append((key, text(value)))
    return tuple(result)
