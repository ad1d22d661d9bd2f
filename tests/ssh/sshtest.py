"""Helpers for the SSH transport's tests."""

from __future__ import annotations

import dataclasses
import subprocess
from pathlib import Path
from typing import Any

from hil.inventory.model import Host, Inventory


def with_ssh(base: Host, **changes: Any) -> Host:
    """``base`` with some ssh settings changed."""
    return dataclasses.replace(base, ssh=dataclasses.replace(base.ssh, **changes))


def inventory_of(base: Inventory, *hosts: Host) -> Inventory:
    """An inventory holding ``hosts`` (no links), for a pool."""
    return Inventory(path=base.path, hosts={h.name: h for h in hosts})


def make_key(path: Path, passphrase: str = "") -> Path:
    """A new ed25519 key pair made by ssh-keygen; returns the private key path."""
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", passphrase, "-f", str(path)],
        check=True,
        timeout=30,
    )
    return path


def openssh_fingerprint(public_key: Path) -> str:
    """The SHA256 fingerprint as OpenSSH's ssh-keygen prints it."""
    out = subprocess.run(
        ["ssh-keygen", "-l", "-E", "sha256", "-f", str(public_key)],
        check=True,
        timeout=30,
        capture_output=True,
        text=True,
    ).stdout
    return out.split()[1]
