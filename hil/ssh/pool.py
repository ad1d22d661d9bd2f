"""One SSH session per host for a whole run, jump hosts included."""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from hil.errors import InputError
from hil.inventory.model import Host, Inventory
from hil.ssh.endpoint import DEFAULT_SSH_CONFIG, jump_host, load_ssh_config, resolve
from hil.ssh.session import SSHSession

log = logging.getLogger("hil.ssh")


class SSHPool:
    """Sessions to the inventory's hosts, opened on first use and shared.

    A host with ``ssh.jump`` (or an ssh_config ProxyJump) is reached through
    a direct-tcpip channel of its jump host's session, recursively; a jump
    that is not an inventory host name is a ``[user@]host[:port]`` spec.
    A session found dead is reconnected on the next ``get``.
    """

    def __init__(
        self,
        inventory: Inventory,
        *,
        ssh_config: Path | None = DEFAULT_SSH_CONFIG,
        connect_timeout: float | None = None,
    ) -> None:
        self.inventory = inventory
        self._config_path = ssh_config
        self._config = load_ssh_config(ssh_config)
        self._timeout = connect_timeout
        self._sessions: dict[str, SSHSession] = {}
        self._lock = threading.RLock()

    def get(self, host_name: str) -> SSHSession:
        """The session to inventory host ``host_name``, connecting if needed."""
        host = self.inventory.host(host_name)
        with self._lock:
            return self._session(host, chain=(), via=None)

    def drop(self, host_name: str) -> None:
        """Close the session to ``host_name`` if one is open (the host went down): the next
        ``get`` connects anew.  Sessions jumping through it notice on their own."""
        with self._lock:
            session = self._sessions.pop(host_name, None)
        if session is not None:
            session.close()

    def close_all(self) -> None:
        """Close every session, targets before the jump hosts they go through."""
        with self._lock:
            for name in reversed(list(self._sessions)):
                self._sessions.pop(name).close()

    def __enter__(self) -> SSHPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close_all()

    def _session(self, host: Host, chain: tuple[str, ...], via: SSHSession | None) -> SSHSession:
        cached = self._sessions.get(host.name)
        if cached is not None:
            if cached.is_alive():
                return cached
            log.warning("session to %s is dead; reconnecting", host.name)
            self._sessions.pop(host.name).close()
        if host.name in chain:
            raise InputError(f"jump hosts form a loop: {' -> '.join((*chain, host.name))}")
        if via is None:
            jumps = resolve(host, self._config).jumps
            via = self._through(jumps, host, (*chain, host.name))
        session = SSHSession.connect(
            host, jump_session=via, timeout=self._timeout, ssh_config=self._config_path
        )
        self._sessions[host.name] = session
        return session

    def _through(
        self, jumps: tuple[str, ...], target: Host, chain: tuple[str, ...]
    ) -> SSHSession | None:
        """The session of the last hop, each hop reached through the one before."""
        via = None
        for spec in jumps:
            hop = self.inventory.hosts.get(spec) or jump_host(spec, target)
            via = self._session(hop, chain, via)
        return via
