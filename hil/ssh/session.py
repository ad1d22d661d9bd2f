"""One SSH connection to one inventory host, shared by commands, SFTP and the agent."""

from __future__ import annotations

import logging
import shlex
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import paramiko

from hil import tools
from hil.errors import CommandFailed, CommandTimeout, InputError, SSHError
from hil.inventory.model import Host
from hil.ssh.channel import RemoteProcess, exchange
from hil.ssh.connect import open_transport
from hil.ssh.endpoint import DEFAULT_SSH_CONFIG, Endpoint, load_ssh_config, resolve

# The remote ``timeout`` kills a command's process group this long after our
# own deadline (it starts a little later), so we see the deadline first.
_REMOTE_GRACE = 0.5
_REMOTE_KILL_AFTER = "2"  # KILL this long after TERM, for commands that ignore TERM
_TIMEOUT_STATUS = 124  # what ``timeout`` exits with when it fired
# Reports the process group (field 5 of /proc/PID/stat) before exec'ing the
# process, so that RemoteProcess.close() can signal the whole group.
_REPORT_PGID = 'read -r _ _ _ _ pgid _ < /proc/$$/stat && echo "$pgid" && exec "$@"'
# Ends a command when its connection ends: sshd leaves an exec channel's command running
# when the client dies, so the command of a killed controller (a link pull's) could change
# the host after the next run had replayed its journal.  The watcher polls the sshd that
# started the shell ($PPID) once a second, and stops with the shell ($$; sshd may end it
# when we close a timed-out command's channel); the command keeps the channel's stdin (an
# asynchronous command's would be /dev/null).
_WATCHED = (
    'p=$PPID; exec 3<&0; "$@" <&3 3<&- & c=$!; exec 3<&-; '
    '(while [ -e "/proc/$$" ]; do [ -e "/proc/$p" ] || exec kill -TERM "$c"; sleep 1; done) '
    '</dev/null >/dev/null 2>&1 & w=$!; wait "$c"; s=$?; kill "$w" 2>/dev/null; exit "$s"'
)
_KILL_TIMEOUT = 10.0
_SFTP_TIMEOUT = 60.0  # per SFTP request, so a dead host cannot hang an upload


@dataclass(frozen=True)
class Result:
    """What a finished remote command did."""

    argv: tuple[str, ...]
    status: int
    stdout: str
    stderr: str

    def why(self) -> str:
        """What the command said of a failure: its stderr's last line, else its exit status."""
        return (self.stderr.strip().splitlines() or [f"exit {self.status}"])[-1]


class SSHSession:
    """An authenticated connection to one host; see ``connect``."""

    def __init__(
        self, host: Host, endpoint: Endpoint, transport: paramiko.Transport, log: logging.Logger
    ) -> None:
        self.host = host
        self.endpoint = endpoint
        self.transport = transport
        self.log = log
        self._sftp: paramiko.SFTPClient | None = None
        self._sftp_lock = threading.Lock()

    @classmethod
    def connect(
        cls,
        host: Host,
        *,
        jump_session: SSHSession | None = None,
        timeout: float | None = None,
        ssh_config: Path | None = DEFAULT_SSH_CONFIG,
    ) -> SSHSession:
        """Connect and authenticate to ``host``, through ``jump_session`` if given.

        ``timeout`` bounds the whole connect (default: the host's
        ssh.connect_timeout).  ``ssh_config`` resolves aliases (None: none).
        A host whose inventory or ssh_config names a jump host needs
        ``jump_session``; SSHPool provides it.
        """
        ep = resolve(host, load_ssh_config(ssh_config))
        if ep.jumps and jump_session is None:
            raise SSHError(
                host.name,
                f"needs the jump host {' then '.join(ep.jumps)}: connect it through "
                f"SSHPool, or pass jump_session",
            )
        log = logging.getLogger(f"hil.ssh.{host.name}")
        via = None if jump_session is None else (jump_session.name, jump_session.transport)
        transport = open_transport(ep, ep.connect_timeout if timeout is None else timeout, log, via)
        log.info("connected to %s%s", ep, f" via {jump_session.name}" if jump_session else "")
        return cls(host, ep, transport, log)

    @property
    def name(self) -> str:
        return self.host.name

    def is_alive(self) -> bool:
        """True while the transport is up."""
        return self.transport.is_active()

    def run(
        self,
        argv: list[str],
        *,
        timeout: float = 60,
        check: bool = True,
        input: bytes | str | None = None,
        sudo: bool = False,
    ) -> Result:
        """Run ``argv`` on the host and wait for it, at most ``timeout`` seconds.

        ``input`` is fed to its stdin (which is closed right away otherwise).
        ``sudo`` asks for root: the command goes through ``sudo -n`` when the
        host's ssh.sudo says the login user needs it.  Raises CommandFailed
        when ``check`` and the exit status is not 0, CommandTimeout when it
        runs too long (the remote ``timeout`` kills its process group within
        a second of that).
        """
        argv = _checked(argv)
        remote = tools.argv(
            "timeout", f"--kill-after={_REMOTE_KILL_AFTER}", f"{timeout + _REMOTE_GRACE:g}"
        )
        watched = tools.argv("sh", "-c", _WATCHED, "hil-run")
        command = shlex.join(watched + self._sudo(sudo) + remote + argv)
        data = input.encode() if isinstance(input, str) else (input or b"")
        started = time.monotonic()
        finished = self._execute(argv, command, data, started + timeout)
        if finished is None or (
            finished[0] == _TIMEOUT_STATUS and time.monotonic() - started >= timeout
        ):
            raise CommandTimeout(
                self.name,
                f"{shlex.join(argv)} did not finish within {timeout:g}s and was killed; "
                f"raise its timeout if it is just slow",
            )
        status, out, err = finished
        result = Result(
            tuple(argv), status, out.decode(errors="replace"), err.decode(errors="replace")
        )
        if check and status != 0:
            raise CommandFailed(self.name, argv, status, result.stdout, result.stderr)
        return result

    def _execute(
        self, argv: list[str], command: str, data: bytes, deadline: float
    ) -> tuple[int, bytes, bytes] | None:
        """Exit status, stdout and stderr of ``command``; None when ``deadline`` passed."""
        chan = self._open_channel()
        try:
            self.log.debug("run: %s", shlex.join(argv))
            chan.exec_command(command)
            output = exchange(chan, data, deadline)
            return None if output is None else (chan.recv_exit_status(), *output)
        except (paramiko.SSHException, OSError, EOFError) as e:
            raise SSHError(self.name, f"{shlex.join(argv)}: connection failed: {e}") from None
        finally:
            _close_quietly(chan)

    def open_process(
        self, argv: list[str], *, sudo: bool = False, start_timeout: float = 30
    ) -> RemoteProcess:
        """Start ``argv`` on its own exec channel and return it running.

        The caller talks to it through the RemoteProcess and must close() it.
        CommandFailed when it cannot start (e.g. sudo refuses), CommandTimeout
        when it has not started within ``start_timeout`` seconds.
        """
        argv = _checked(argv)
        wrapped = self._sudo(sudo) + tools.argv("sh", "-c", _REPORT_PGID, "hil-process", *argv)
        chan = self._open_channel()
        try:
            chan.exec_command(shlex.join(wrapped))
        except (paramiko.SSHException, OSError, EOFError) as e:
            _close_quietly(chan)
            raise SSHError(self.name, f"cannot start {shlex.join(argv)}: {e}") from None

        def kill_group(pgid: int, signal: str) -> bool:
            return self._kill_group(pgid, signal, sudo)

        proc = RemoteProcess.start(self.name, argv, chan, kill_group, start_timeout)
        self.log.debug("started: %s (process group %d)", shlex.join(argv), proc.pgid)
        return proc

    def sftp(self) -> paramiko.SFTPClient:
        """The session's SFTP client, opened on first use."""
        with self._sftp_lock:
            if self._sftp is None:
                self._sftp = self._open_sftp()
            return self._sftp

    def _open_sftp(self) -> paramiko.SFTPClient:
        try:
            client = paramiko.SFTPClient.from_transport(self.transport)
        except (paramiko.SSHException, OSError, EOFError) as e:
            raise SSHError(
                self.name, f"cannot open SFTP: {e}; is the sftp Subsystem enabled?"
            ) from None
        sftp_channel = None if client is None else client.get_channel()
        if client is None or sftp_channel is None:
            raise SSHError(self.name, "SFTP refused; is the sftp Subsystem enabled?")
        sftp_channel.settimeout(_SFTP_TIMEOUT)
        return client

    def put_file(self, local: Path, remote: str, mode: int = 0o644) -> None:
        """Upload ``local`` to ``remote`` atomically (temp name, then rename)."""
        partial = f"{remote}.part"
        sftp = self.sftp()
        try:
            sftp.put(str(local), partial)
            sftp.chmod(partial, mode)
            sftp.posix_rename(partial, remote)
        except (OSError, paramiko.SSHException, EOFError) as e:
            raise SSHError(self.name, f"cannot upload {local} to {remote}: {e}") from None
        self.log.debug("uploaded %s to %s", local, remote)

    def close(self) -> None:
        """Close SFTP and the connection; safe to call twice."""
        with self._sftp_lock:
            if self._sftp is not None:
                self._sftp.close()
                self._sftp = None
        self.transport.close()

    def __enter__(self) -> SSHSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _sudo(self, wanted: bool) -> list[str]:
        return tools.argv("sudo", "-n", "--") if wanted and self.endpoint.sudo else []

    def _kill_group(self, pgid: int, signal: str, sudo: bool) -> bool:
        """Signal a remote process group; False when the connection could not carry the
        signal (a dead session has nothing left to kill)."""
        try:
            self.run(
                tools.argv("kill", "-s", signal, "--", f"-{pgid}"),
                timeout=_KILL_TIMEOUT,
                check=False,
                sudo=sudo,
            )
        except (SSHError, CommandTimeout) as e:
            self.log.warning("could not signal process group %d: %s", pgid, e)
            return False
        return True

    def _open_channel(self) -> paramiko.Channel:
        try:
            return self.transport.open_session()
        except (paramiko.SSHException, OSError, EOFError) as e:
            raise SSHError(
                self.name, f"cannot open a channel to {self.endpoint}: {e}; reconnect"
            ) from None


def _checked(argv: list[str]) -> list[str]:
    if not argv or not all(isinstance(a, str) for a in argv):
        raise InputError(f"a command is a non-empty list of strings, not {argv!r}")
    return list(argv)


def _close_quietly(chan: paramiko.Channel) -> None:
    """Close a channel that is done with, whatever state its transport is in.

    A host that went away (a guest's QEMU gone with a panic) makes the close's own
    message fail with EOFError; raised from a ``finally`` that would replace the
    error that ended the command (the crash watch's, a timeout's) with a bare one.
    """
    try:
        chan.close()
    except (paramiko.SSHException, OSError, EOFError):
        pass
