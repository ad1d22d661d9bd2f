"""Opening an authenticated paramiko Transport to an endpoint, with clear errors.

The whole connect (TCP or jump channel, banner, key exchange, host key check,
authentication) is bounded by one deadline; each failure becomes one of
Unreachable, HostKeyError or AuthenticationFailed naming what failed.
"""

from __future__ import annotations

import errno
import logging
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import paramiko

from hil.errors import AuthenticationFailed, Unreachable
from hil.inventory.secret import Secret
from hil.ssh.endpoint import Endpoint
from hil.ssh.hostkeys import known_keys, preferred_key_types, verify

KEEPALIVE_INTERVAL = 15  # seconds; keeps NAT and firewall state of idle sessions
CHANNEL_TIMEOUT = 10.0  # opening any channel (exec, SFTP, jump); paramiko's default is 1 h
# paramiko annotates from_path's password as str, but hands it to cryptography,
# which needs bytes.
_from_path: Callable[[str, bytes], paramiko.PKey] = paramiko.PKey.from_path  # type: ignore[assignment]
_CHECK_HOST = "check the host is up and ssh.host/ssh.port in the inventory"
_SOCKET_ERRORS = {
    errno.ECONNREFUSED: "connection refused",
    errno.EHOSTUNREACH: "no route to host",
    errno.ENETUNREACH: "network unreachable",
    errno.ETIMEDOUT: "timed out",
}


class _DemoteErrors(logging.Filter):
    """paramiko logs a failed handshake (a host still booting, sshd gone) at ERROR, with
    its traceback line by line; hil raises its own error naming the host, so a waiter
    retrying every few seconds would print a wall of tracebacks.  They become DEBUG."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.ERROR:
            return True
        record.levelno, record.levelname = logging.DEBUG, "DEBUG"
        return logging.getLogger(record.name).isEnabledFor(logging.DEBUG)


def _paramiko_channel(log: logging.Logger) -> str:
    """The logger name paramiko logs under for this host, with its errors demoted."""
    name = f"{log.name}.paramiko"
    channel = logging.getLogger(name)
    if not any(isinstance(f, _DemoteErrors) for f in channel.filters):
        channel.addFilter(_DemoteErrors())
    return name


def open_transport(
    ep: Endpoint,
    timeout: float,
    log: logging.Logger,
    via: tuple[str, paramiko.Transport] | None = None,
) -> paramiko.Transport:
    """An authenticated transport to ``ep``, directly or through ``via`` (name, transport)."""
    deadline = time.monotonic() + timeout
    sock = _open_socket(ep, via, timeout)
    transport = paramiko.Transport(sock)
    # paramiko's own messages go under the host's logger too.
    transport.set_log_channel(_paramiko_channel(log))
    try:
        _handshake(ep, transport, deadline, timeout, log)
        _authenticate(ep, transport, deadline)
    except BaseException:
        transport.close()
        raise
    transport.set_keepalive(KEEPALIVE_INTERVAL)
    transport.channel_timeout = CHANNEL_TIMEOUT
    return transport


def _unreachable(ep: Endpoint, what: str) -> Unreachable:
    return Unreachable(
        ep.host_name, f"cannot connect to {ep.address}:{ep.port}: {what}; {_CHECK_HOST}"
    )


def _open_socket(
    ep: Endpoint, via: tuple[str, paramiko.Transport] | None, timeout: float
) -> socket.socket | paramiko.Channel:
    if via is not None:
        return _open_jump_channel(ep, *via, timeout)
    deadline = time.monotonic() + timeout
    failure = "no address"
    for family, kind, proto, _, sockaddr in _resolve(ep, timeout):
        sock = socket.socket(family, kind, proto)
        sock.settimeout(max(deadline - time.monotonic(), 0.01))
        try:
            sock.connect(sockaddr)
        except TimeoutError:
            sock.close()
            failure = f"timed out after {timeout:g}s"
            break
        except OSError as e:
            sock.close()
            failure = _SOCKET_ERRORS.get(e.errno or 0, e.strerror or str(e))
            continue
        # Agent calls are small request/answer pairs: no Nagle delay on them.
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock
    raise _unreachable(ep, failure)


def _resolve(ep: Endpoint, timeout: float) -> list[tuple[Any, ...]]:
    """getaddrinfo bounded by ``timeout``: a dead DNS server must not hang a run."""
    found: list[Any] = []

    def lookup() -> None:
        try:
            found.append(socket.getaddrinfo(ep.address, ep.port, type=socket.SOCK_STREAM))
        except OSError as e:
            found.append(e)

    worker = threading.Thread(target=lookup, name=f"hil-dns-{ep.host_name}", daemon=True)
    worker.start()
    worker.join(timeout)
    if not found:
        raise _unreachable(ep, f"DNS lookup of {ep.address} took more than {timeout:g}s")
    if isinstance(found[0], OSError):
        raise _unreachable(ep, f"DNS lookup of {ep.address} failed ({found[0]})")
    return list(found[0])


def _open_jump_channel(
    ep: Endpoint, hop: str, via: paramiko.Transport, timeout: float
) -> paramiko.Channel:
    try:
        return via.open_channel(
            "direct-tcpip", (ep.address, ep.port), ("127.0.0.1", 0), timeout=timeout
        )
    except paramiko.ChannelException as e:
        what = f"the jump host {hop} could not connect: {e.text}"
    except paramiko.SSHException as e:
        what = f"through the jump host {hop}: {e} (timeout {timeout:g}s)"
    raise _unreachable(ep, what)


def _handshake(
    ep: Endpoint, t: paramiko.Transport, deadline: float, timeout: float, log: logging.Logger
) -> None:
    """Banner and key exchange, then the host key check."""
    remaining = max(deadline - time.monotonic(), 0.1)
    t.banner_timeout = t.handshake_timeout = remaining
    known = known_keys(ep)
    options = t.get_security_options()
    options.key_types = preferred_key_types(known, tuple(options.key_types))
    done = threading.Event()
    t.start_client(event=done)
    done.wait(remaining)
    if not t.is_active():
        e = t.get_exception()
        raise _unreachable(ep, f"SSH handshake failed: {e or 'connection closed'}")
    if not done.is_set():
        raise _unreachable(ep, f"no SSH handshake within {timeout:g}s")
    verify(ep, known, t.get_remote_server_key(), log)


def _authenticate(ep: Endpoint, t: paramiko.Transport, deadline: float) -> None:
    """Each identity file in turn, then the password; the first the host accepts wins."""
    if not ep.identity_files and ep.password is None:
        raise AuthenticationFailed(
            ep.host_name,
            f"no identity file for {ep}: set ssh.identity_file in the inventory "
            f"or create ~/.ssh/id_ed25519",
        )
    for path in ep.identity_files:
        t.auth_timeout = max(deadline - time.monotonic(), 0.1)
        try:
            t.auth_publickey(ep.user, _load_key(ep, path))
            return
        except paramiko.BadAuthenticationType as e:
            if ep.password is not None and "password" in e.allowed_types:
                break
            raise AuthenticationFailed(
                ep.host_name,
                f"{ep} does not accept public keys (it allows: {', '.join(e.allowed_types)})",
            ) from None
        except paramiko.AuthenticationException:
            continue
        except paramiko.SSHException as e:
            raise _unreachable(ep, f"authentication did not complete: {e}") from None
    if ep.password is not None:
        _authenticate_password(ep, ep.password, t, deadline)
        return
    keys = ", ".join(str(p) for p in ep.identity_files)
    raise AuthenticationFailed(
        ep.host_name,
        f"{ep} refused the key(s) {keys}; install the public key ({ep.identity_files[0]}.pub) "
        f"in ~{ep.user}/.ssh/authorized_keys on the host, or set ssh.identity_file",
    )


def _authenticate_password(
    ep: Endpoint, secret: Secret, t: paramiko.Transport, deadline: float
) -> None:
    """``ssh.password``, after every key was refused (or none is configured)."""
    keys = ", ".join(str(p) for p in ep.identity_files)
    refused = f"{ep} refused the key(s) {keys} and" if keys else f"{ep}"
    t.auth_timeout = max(deadline - time.monotonic(), 0.1)
    try:
        # The value goes straight to paramiko, never into a local of a frame that
        # may raise: a traceback printed with its locals (pytest -l) must not show it.
        t.auth_password(ep.user, _reveal(ep, secret, "ssh.password"))
    except paramiko.BadAuthenticationType as e:
        raise AuthenticationFailed(
            ep.host_name,
            f"{refused} does not accept passwords (it allows: {', '.join(e.allowed_types)}); "
            f"install a public key in ~{ep.user}/.ssh/authorized_keys on the host and set "
            f"ssh.identity_file",
        ) from None
    except paramiko.AuthenticationException:
        raise AuthenticationFailed(
            ep.host_name,
            f"{refused} refused the password ({secret.describe()}); check ssh.password "
            f"in the inventory",
        ) from None
    except paramiko.SSHException as e:
        raise _unreachable(ep, f"authentication did not complete: {e}") from None


def _reveal(ep: Endpoint, secret: Secret, field: str) -> str:
    """The secret's text; AuthenticationFailed naming the variable when it is unset."""
    value = secret.value()
    if value is None:
        raise AuthenticationFailed(
            ep.host_name,
            f"{field} comes from the environment variable {secret.env}, "
            f"which is not set; export {secret.env} before running hil",
        )
    return value


def _load_key(ep: Endpoint, path: Path) -> paramiko.PKey:
    """The identity file; an encrypted one unlocked with ``ssh.key_passphrase``."""
    try:
        return paramiko.PKey.from_path(str(path))
    except (paramiko.PasswordRequiredException, TypeError) as e:
        # cryptography reports an encrypted OpenSSH-format key as a TypeError.
        if isinstance(e, TypeError) and "password" not in str(e):
            raise AuthenticationFailed(
                ep.host_name, f"cannot load identity file {path}: {e}"
            ) from None
    except (OSError, paramiko.SSHException, ValueError) as e:
        raise AuthenticationFailed(ep.host_name, f"cannot load identity file {path}: {e}") from None
    return _unlock_key(ep, path)


def _unlock_key(ep: Endpoint, path: Path) -> paramiko.PKey:
    if ep.key_passphrase is None:
        raise AuthenticationFailed(
            ep.host_name,
            f"identity file {path} is encrypted; set ssh.key_passphrase in the inventory "
            f"(better as {{env: NAME}} than as text) or use an unencrypted key",
        )
    try:
        # Not kept in a local (see _authenticate_password).
        return _from_path(str(path), _reveal(ep, ep.key_passphrase, "ssh.key_passphrase").encode())
    except (paramiko.SSHException, TypeError, ValueError):
        # The error's text says nothing useful (cryptography: "no BEGIN/END
        # delimiters"), and the secret must never reach a message.
        raise AuthenticationFailed(
            ep.host_name,
            f"ssh.key_passphrase ({ep.key_passphrase.describe()}) does not unlock identity "
            f"file {path}; check the passphrase (ssh-keygen -y -f {path} asks for it)",
        ) from None
