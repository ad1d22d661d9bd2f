"""Host key verification against an OpenSSH known_hosts file.

paramiko's ``HostKeys`` reads the file, including ``[host]:port`` and hashed
(``|1|``) entries.  We decide ourselves, so that both refusals say exactly
what was seen and how to accept the key.
"""

from __future__ import annotations

import base64
import fcntl
import hashlib
import logging
import os

import paramiko

from hil.errors import HostKeyError
from hil.ssh.endpoint import Endpoint

# An RSA host key is negotiated under these algorithm names.
_RSA_ALGORITHMS = ("rsa-sha2-512", "rsa-sha2-256", "ssh-rsa")


def fingerprint(key: paramiko.PKey) -> str:
    """The OpenSSH-style SHA256 fingerprint of a public key."""
    digest = hashlib.sha256(key.asbytes()).digest()
    return "SHA256:" + base64.b64encode(digest).decode().rstrip("=")


def known_keys(ep: Endpoint) -> dict[str, paramiko.PKey]:
    """The keys known_hosts holds for the endpoint, by key type."""
    if not ep.known_hosts.exists():
        return {}
    try:
        entries = paramiko.HostKeys(str(ep.known_hosts)).lookup(ep.known_hosts_name)
    except (OSError, paramiko.SSHException) as e:
        raise HostKeyError(ep.host_name, f"cannot read {ep.known_hosts}: {e}") from None
    return {} if entries is None else {t: entries[t] for t in entries.keys()}


def preferred_key_types(known: dict[str, paramiko.PKey], available: tuple[str, ...]) -> list[str]:
    """Host key algorithms with the known ones first, so the host offers those."""
    first: list[str] = []
    for name in known:
        first.extend(_RSA_ALGORITHMS if name == "ssh-rsa" else (name,))
    return [a for a in first if a in available] + [a for a in available if a not in first]


def verify(
    ep: Endpoint, known: dict[str, paramiko.PKey], offered: paramiko.PKey, log: logging.Logger
) -> None:
    """Accept ``offered`` given the ``known`` keys, or raise HostKeyError.

    ``accept-new`` records a key for a host that has none; it never replaces one.
    """
    if not known:
        if ep.host_key_policy != "accept-new":
            raise HostKeyError(ep.host_name, _unknown_message(ep, offered))
        _append(ep, offered)
        log.warning(
            "added host key %s %s of %s to %s (policy accept-new)",
            offered.get_name(),
            fingerprint(offered),
            ep.known_hosts_name,
            ep.known_hosts,
        )
        return
    if known.get(offered.get_name()) != offered:
        raise HostKeyError(ep.host_name, _changed_message(ep, known, offered))


def _unknown_message(ep: Endpoint, offered: paramiko.PKey) -> str:
    scan = f"ssh-keyscan -p {ep.port} {ep.address}"
    # Behind a jump host the scan only works from there.
    how = (
        f"run {scan} on {ep.jumps[-1]} and add its output to {ep.known_hosts}"
        if ep.jumps
        else f"run: {scan} >> {ep.known_hosts}"
    )
    return (
        f"host key of {ep.known_hosts_name} ({offered.get_name()} {fingerprint(offered)}) "
        f"is not in {ep.known_hosts}; if this is the right host, {how} "
        f"(or set ssh.host_key_policy: accept-new for this host)"
    )


def _changed_message(ep: Endpoint, known: dict[str, paramiko.PKey], offered: paramiko.PKey) -> str:
    expected = ", ".join(f"{t} {fingerprint(k)}" for t, k in known.items())
    return (
        f"host key of {ep.known_hosts_name} CHANGED: {ep.known_hosts} expects {expected}, "
        f"the host offered {offered.get_name()} {fingerprint(offered)}; this is either a "
        f"reinstalled host or someone in the middle; if you know the host was reinstalled, run: "
        f"ssh-keygen -R '{ep.known_hosts_name}' -f {ep.known_hosts} and connect again"
    )


def _append(ep: Endpoint, key: paramiko.PKey) -> None:
    """Add one line to known_hosts, under a lock so parallel runs do not interleave."""
    line = f"{ep.known_hosts_name} {key.get_name()} {key.get_base64()}\n"
    try:
        ep.known_hosts.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(ep.known_hosts, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        with os.fdopen(fd, "r+b") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            size = f.seek(0, os.SEEK_END)
            # A file whose last line lacks its newline would glue our line to it.
            if size and (f.seek(size - 1), f.read(1))[1] != b"\n":
                line = "\n" + line
            f.write(line.encode())
    except OSError as e:
        raise HostKeyError(
            ep.host_name, f"cannot add the host key to {ep.known_hosts}: {e}"
        ) from None
