"""Exec channels: running one command to completion, and long-running processes.

Killing what a channel started: OpenSSH's sshd runs each exec request as the
leader of a new process group and, on a ``signal`` channel request, signals
that group (sshd >= 7.9).  We send TERM when a command times out or a
process will not end; for commands, a remote ``timeout`` is the backstop
that holds even if the signal is lost or the connection drops.
"""

from __future__ import annotations

import logging
import select
import shlex
import time

import paramiko
from paramiko.common import cMSG_CHANNEL_REQUEST

from hil.errors import CommandTimeout, SSHError

_CHUNK = 65536
_POLL = 0.2  # seconds between checks for the exit status when no data arrives
_KILL_AFTER = 2.0  # seconds a process gets to exit on TERM before KILL


def send_signal(chan: paramiko.Channel, name: str) -> None:
    """Ask sshd to signal the channel's process group (``name`` like "TERM")."""
    m = paramiko.Message()
    m.add_byte(cMSG_CHANNEL_REQUEST)
    m.add_int(chan.remote_chanid)
    m.add_string("signal")
    m.add_boolean(False)
    m.add_string(name)
    try:
        # paramiko has no public call for RFC 4254 section 6.9 signals.
        chan.transport._send_user_message(m)
    except (paramiko.SSHException, OSError, EOFError):
        pass  # the channel or transport is gone: nothing left to signal


def exchange(chan: paramiko.Channel, data: bytes, deadline: float) -> tuple[bytes, bytes] | None:
    """Feed ``data`` to stdin, then collect stdout and stderr until the command exits.

    Returns None when ``deadline`` (a time.monotonic() value) passes first.
    Writing and reading interleave so that a command that answers while it
    reads cannot deadlock against us.
    """
    out, err = bytearray(), bytearray()
    sent = 0
    if not data:
        chan.shutdown_write()
    while True:
        if sent < len(data) and chan.send_ready():
            sent += chan.send(data[sent : sent + _CHUNK])
            if sent == len(data):
                chan.shutdown_write()
        while chan.recv_ready():
            out += chan.recv(_CHUNK)
        while chan.recv_stderr_ready():
            err += chan.recv_stderr(_CHUNK)
        if chan.exit_status_ready() and chan.eof_received and not _pending(chan):
            return bytes(out), bytes(err)
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return None
        select.select([chan], [], [], min(remaining, _POLL))


def _pending(chan: paramiko.Channel) -> bool:
    return chan.recv_ready() or chan.recv_stderr_ready()


class RemoteProcess:
    """A long-running process on an exec channel (e.g. the agent, JSON lines).

    ``stdin``, ``stdout`` and ``stderr`` are binary file-likes on the channel;
    ``readline(timeout)`` reads stdout line by line without losing a partial
    line when it times out (use one or the other for stdout, not both).
    The process should exit when its stdin closes; ``close()`` closes stdin,
    waits, and signals the process group if it has not exited.
    """

    def __init__(self, host: str, argv: list[str], chan: paramiko.Channel) -> None:
        self.host = host
        self.argv = argv
        self.channel = chan
        self.stdin = chan.makefile_stdin("wb")
        self.stdout = chan.makefile("rb")
        self.stderr = chan.makefile_stderr("rb")
        self._buffer = bytearray()
        self._log = logging.getLogger(f"hil.ssh.{host}")

    def write(self, data: bytes) -> None:
        """Send bytes to the process's stdin."""
        try:
            self.channel.sendall(data)
        except (OSError, paramiko.SSHException) as e:
            raise SSHError(self.host, f"{shlex.join(self.argv)}: stdin closed: {e}") from None

    def readline(self, timeout: float) -> bytes:
        """One line of stdout (with its newline); b"" at end of output.

        Raises CommandTimeout when no full line arrives within ``timeout``;
        what arrived so far stays buffered for the next call.
        """
        deadline = time.monotonic() + timeout
        while True:
            end = self._buffer.find(b"\n")
            if end >= 0:
                line = bytes(self._buffer[: end + 1])
                del self._buffer[: end + 1]
                return line
            if self.channel.recv_ready():
                self._buffer += self.channel.recv(_CHUNK)
                continue
            if self.channel.eof_received or self.channel.closed:
                line = bytes(self._buffer)
                self._buffer.clear()
                return line
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise CommandTimeout(
                    self.host,
                    f"{shlex.join(self.argv)}: no line on stdout within {timeout:g}s",
                )
            select.select([self.channel], [], [], min(remaining, _POLL))

    def poll(self) -> int | None:
        """The exit status if the process has exited, else None."""
        if self.channel.exit_status_ready():
            return self.channel.recv_exit_status()
        return None

    def wait(self, timeout: float) -> int:
        """Wait for the exit status; CommandTimeout after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while not self.channel.exit_status_ready():
            if time.monotonic() >= deadline:
                raise CommandTimeout(
                    self.host, f"{shlex.join(self.argv)} did not exit within {timeout:g}s"
                )
            self.channel.status_event.wait(min(_POLL, max(deadline - time.monotonic(), 0)))
        return self.channel.recv_exit_status()

    def close(self, timeout: float = 5.0) -> int | None:
        """End the process: close stdin, wait, then TERM its process group.

        Returns its exit status, or None when it had to be signalled.
        """
        try:
            if not self.channel.closed:
                self.channel.shutdown_write()
            return self.wait(timeout)
        except CommandTimeout:
            self._log.warning(
                "%s did not exit %gs after its stdin closed; sending TERM",
                shlex.join(self.argv), timeout,
            )
            self._terminate()
            return None
        finally:
            self.channel.close()

    def _terminate(self) -> None:
        """TERM the process group; KILL it when TERM is ignored."""
        send_signal(self.channel, "TERM")
        if not self.channel.status_event.wait(_KILL_AFTER):
            send_signal(self.channel, "KILL")

    def __enter__(self) -> RemoteProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
