"""The files a NetnsLab makes for its run: keys, sshd configs, known_hosts, inventory."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

from hil import tools
from hil.errors import LabError

if TYPE_CHECKING:
    from netnslab.lab import LabHost, NetnsLab

SFTP_SERVER = tools.executable("sftp-server")
ALT_SSH_PORT = 2222


def make_key(path: Path, comment: str) -> None:
    """A fresh unencrypted ed25519 key pair at ``path`` and ``path``.pub."""
    path.parent.mkdir(parents=True, exist_ok=True)
    argv = tools.argv("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path))
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    if done.returncode != 0:
        raise LabError(f"ssh-keygen for {path} failed: {done.stderr.strip()}")


def write_sshd_config(lab: NetnsLab, host: LabHost) -> Path:
    """sshd_config of one host: key login as root only, everything in the run's dir."""
    key = lab.host_key(host.index)
    make_key(key, f"hil-netnslab-{host.name}")
    folder = key.parent
    config = folder / "sshd_config"
    config.write_text(
        "\n".join(
            [
                "# Written by netnslab.NetnsLab; sshd listens on all namespace addresses.",
                "ListenAddress 0.0.0.0",
                "Port 22",
                # A second port, for tests of [host]:port known_hosts entries.
                f"Port {ALT_SSH_PORT}",
                f"HostKey {key}",
                f"PidFile {folder / 'sshd.pid'}",
                f"AuthorizedKeysFile {lab.tmpdir / 'authorized_keys'}",
                "PermitRootLogin prohibit-password",
                "PubkeyAuthentication yes",
                "PasswordAuthentication no",
                "KbdInteractiveAuthentication no",
                "UsePAM no",
                "StrictModes no",
                # Many parallel connects in tests must not hit the default 10:30:100.
                "MaxStartups 100",
                "MaxSessions 100",
                f"Subsystem sftp {SFTP_SERVER}",
                "",
            ]
        )
    )
    return config


def write_known_hosts(lab: NetnsLab) -> None:
    """Each host's key under its management and data addresses (sshd listens on all)."""
    lines = []
    for host in lab.hosts:
        key = lab.host_key(host.index).with_suffix(".pub").read_text().split()
        addresses = [host.mgmt_address.ip] + [p.address.ip for p in host.ports]
        lines += [f"{a} {key[0]} {key[1]}" for a in addresses]
    lab.known_hosts.write_text("\n".join(lines) + "\n")


def write_inventory(lab: NetnsLab) -> None:
    """An inventory in the format of docs/inventory.md for the lab's hosts and cables."""
    out = [
        f"# Written by netnslab.NetnsLab in {lab.tmpdir}: hosts are network namespaces.",
        "version: 1",
        "hosts:",
    ]
    for host in lab.hosts:
        out += [
            f"  {host.name}:                 # namespace {host.netns}",
            "    ssh:",
            f"      host: {host.mgmt_address.ip}",
            "      port: 22",
            "      user: root",
            f"      identity_file: {lab.client_key}",
            f"      known_hosts: {lab.known_hosts}",
            "      host_key_policy: strict",
            "      connect_timeout: 5",
            "    python: /usr/bin/python3",
            "    tags: [netns]",
            "    rnics:" if host.ports else "    rnics: []",
        ]
        for port in host.ports:
            out += [
                f"      - name: {port.name}",
                f"        netdev: {port.netdev}",
                "        driver: siw",
                "        fallback: siw",
                f"        address: {port.address}",
            ]
    out.append("links:" if lab.cables else "links: {}")
    for cable in lab.cables:
        a = f"{lab.hosts[cable.a[0]].name}:{cable.a[1]}"
        b = f"{lab.hosts[cable.b[0]].name}:{cable.b[1]}"
        out += [
            f"  {cable.name}:",
            f"    ends: [{a}, {b}]",
            "    tags: [netns]",
            "    pull:",
            "      - mode: admin",
            f"        end: {a}",
            "      - mode: blackhole",
            f"        end: {b}",
        ]
    lab.inventory_path.write_text("\n".join(out) + "\n")
