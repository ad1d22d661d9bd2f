"""Where and as whom to connect: an inventory host resolved through ssh_config.

A host's ``ssh.host`` may be an alias from ``~/.ssh/config``.  Resolution
merges the two sources with the inventory winning: a field the inventory
leaves at its default (port 22, user root, no identity file, no jump, no
known_hosts file) takes the ssh_config value when there is one; for port
and user, only a value from a block that names the host, not from ``Host *``.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path

import paramiko

from hil.errors import InputError
from hil.inventory.model import Host, HostKeyPolicy, SshConfig
from hil.inventory.secret import Secret

DEFAULT_SSH_CONFIG = Path("~/.ssh/config")
DEFAULT_KNOWN_HOSTS = Path("~/.ssh/known_hosts")
# Tried in this order when neither the inventory nor ssh_config names a key.
DEFAULT_IDENTITIES = ("~/.ssh/id_ed25519", "~/.ssh/id_ecdsa", "~/.ssh/id_rsa")
_DEFAULTS = SshConfig(host="")
_UNMATCHED = "hil-matches-only-catch-all-blocks.invalid"


@dataclass(frozen=True)
class Endpoint:
    """A host's SSH settings with every alias and default resolved."""

    host_name: str
    address: str
    port: int
    user: str
    identity_files: tuple[Path, ...]
    # Jump hops, first hop first: inventory host names or [user@]host[:port].
    jumps: tuple[str, ...]
    known_hosts: Path
    host_key_policy: HostKeyPolicy
    connect_timeout: float
    sudo: bool
    # Secrets print as $NAME or <secret> (hil.inventory.secret), so the repr is safe to log.
    key_passphrase: Secret | None
    password: Secret | None

    @property
    def known_hosts_name(self) -> str:
        """The name OpenSSH files this host's key under in known_hosts."""
        return self.address if self.port == 22 else f"[{self.address}]:{self.port}"

    def __str__(self) -> str:
        return f"{self.user}@{self.address}:{self.port}"


def load_ssh_config(path: Path | None) -> paramiko.SSHConfig:
    """Parse an ssh_config file; a missing file is an empty config."""
    if path is None:
        return paramiko.SSHConfig()
    path = path.expanduser()
    if not path.exists():
        return paramiko.SSHConfig()
    try:
        return paramiko.SSHConfig.from_path(str(path))
    except (OSError, ValueError, paramiko.ConfigParseError) as e:
        raise InputError(f"{path}: cannot parse ssh_config: {e}") from None


def resolve(host: Host, config: paramiko.SSHConfig) -> Endpoint:
    """Merge ``host.ssh`` with the ssh_config entry of ``host.ssh.host``."""
    ssh = host.ssh
    conf = config.lookup(ssh.host)
    # Port and User from catch-all blocks (``Host *``) do not replace the
    # inventory's defaults: a personal "User me" must not undo "user: root".
    generic = config.lookup(_UNMATCHED)
    for key in ("port", "user"):
        if key in conf and conf.get(key) == generic.get(key):
            del conf[key]
    return Endpoint(
        host_name=host.name,
        address=conf.get("hostname", ssh.host),
        port=_port(host, conf),
        user=ssh.user if ssh.user != _DEFAULTS.user else conf.get("user", ssh.user),
        identity_files=_identities(ssh, conf),
        jumps=_jumps(ssh, conf),
        known_hosts=_known_hosts(ssh, conf),
        host_key_policy=ssh.host_key_policy,
        connect_timeout=ssh.connect_timeout,
        sudo=ssh.sudo,
        key_passphrase=ssh.key_passphrase,
        password=ssh.password,
    )


def jump_host(spec: str, target: Host) -> Host:
    """A host for a ``[user@]host[:port]`` jump spec that is not in the inventory.

    It shares the target's key (and its passphrase), known_hosts file and
    policy: the lab engineer configured those for this path.  Not the
    target's password: that belongs to another host's account.
    """
    user, _, hostport = spec.rpartition("@")
    name, port = hostport, _DEFAULTS.port
    if hostport.count(":") == 1:
        name, _, port_text = hostport.partition(":")
        if not port_text.isdigit():
            raise InputError(f"host {target.name}: jump {spec!r}: port is not a number")
        port = int(port_text)
    if not name:
        raise InputError(f"host {target.name}: jump {spec!r} names no host")
    ssh = dataclasses.replace(
        target.ssh,
        host=name,
        port=port,
        user=user or _DEFAULTS.user,
        jump=None,
        sudo=False,
        password=None,
    )
    return Host(name=spec, ssh=ssh)


def _port(host: Host, conf: paramiko.SSHConfigDict) -> int:
    if host.ssh.port != _DEFAULTS.port or "port" not in conf:
        return host.ssh.port
    try:
        return int(conf["port"])
    except ValueError:
        raise InputError(
            f"host {host.name}: ssh_config Port {conf['port']!r} is not a number"
        ) from None


def _identities(ssh: SshConfig, conf: paramiko.SSHConfigDict) -> tuple[Path, ...]:
    if ssh.identity_file:
        return (Path(ssh.identity_file).expanduser(),)
    if "identityfile" in conf:
        return tuple(Path(p).expanduser() for p in conf["identityfile"])
    return tuple(p for p in (Path(d).expanduser() for d in DEFAULT_IDENTITIES) if os.path.exists(p))


def _jumps(ssh: SshConfig, conf: paramiko.SSHConfigDict) -> tuple[str, ...]:
    if ssh.jump:
        return (ssh.jump,)
    spec = conf.get("proxyjump", "none")
    if spec == "none":
        return ()
    return tuple(s.strip() for s in spec.split(",") if s.strip())


def _known_hosts(ssh: SshConfig, conf: paramiko.SSHConfigDict) -> Path:
    if ssh.known_hosts:
        return Path(ssh.known_hosts).expanduser()
    files = conf.get("userknownhostsfile", "").split()
    return Path(files[0] if files else DEFAULT_KNOWN_HOSTS).expanduser()
