"""Exec channels: running one command to completion, and long-running processes.

Closing a channel does not end what it started: sshd leaves the process
running.  sshd's ``signal`` channel request does not help either, since
sshd refuses it for root logins (no privilege separation after auth).  So
the session runs each command under the remote ``timeout``, and a
RemoteProcess reports its process group first thing, so that ``close()``
can kill that group over a second channel when the process will not exit.
"""

from __future__ import annotations

import logging
import select
import shlex
import time
from collections.abc import Callable

import paramiko

from hil.errors import CommandFailed, CommandTimeout, SSHError

_CHUNK = 65536
_POLL = 0.2  # seconds between checks for the exit status when no data arrives
_SEND_POLL = 0.005  # seconds between checks for send window while input is pending
_KILL_AFTER = 2.0  # seconds a process gets to exit on TERM before KILL


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
        sent = _feed(chan, data, sent)
        while chan.recv_ready():
            out += chan.recv(_CHUNK)
        while chan.recv_stderr_ready():
            err += chan.recv_stderr(_CHUNK)
        if chan.exit_status_ready() and chan.eof_received and not _pending(chan):
            return bytes(out), bytes(err)
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return None
        # The channel's fd signals incoming data only; while input waits for
        # the remote window to open, poll briefly instead.
        select.select([chan], [], [], min(remaining, _POLL if sent >= len(data) else _SEND_POLL))


def _feed(chan: paramiko.Channel, data: bytes, sent: int) -> int:
    """Send what the remote window takes now; closes stdin when all is sent."""
    try:
        while sent < len(data) and chan.send_ready():
            sent += chan.send(data[sent : sent + _CHUNK])
            if sent == len(data):
                chan.shutdown_write()
    except OSError:
        # The command closed its end (it exited without reading everything):
        # stop feeding it, its output and status still count.
        return len(data)
    return sent


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

    def __init__(
        self,
        host: str,
        argv: list[str],
        chan: paramiko.Channel,
        kill_group: Callable[[int, str], bool],
    ) -> None:
        self.host = host
        self.argv = argv
        self.channel = chan
        self.pgid = 0  # the remote process group, as the start wrapper reported it
        # (pgid, signal name): signals it over another channel; False when that failed.
        self._kill_group = kill_group
        self.stdin = chan.makefile_stdin("wb")
        self.stdout = chan.makefile("rb")
        self.stderr = chan.makefile_stderr("rb")
        self._buffer = bytearray()
        self._log = logging.getLogger(f"hil.ssh.{host}")

    @classmethod
    def start(
        cls,
        host: str,
        argv: list[str],
        chan: paramiko.Channel,
        kill_group: Callable[[int, str], bool],
        timeout: float,
    ) -> RemoteProcess:
        """Wrap a channel whose command first prints its process group id."""
        proc = cls(host, argv, chan, kill_group)
        proc.pgid = proc._read_pgid(timeout)
        return proc

    def _read_pgid(self, timeout: float) -> int:
        """The first line, read byte by byte so stdout keeps everything after it."""
        deadline = time.monotonic() + timeout
        line = b""
        while not line.endswith(b"\n"):
            if self.channel.recv_ready():
                line += self.channel.recv(1)
            elif self.channel.eof_received:
                break
            elif time.monotonic() >= deadline:
                self.channel.close()
                raise CommandTimeout(
                    self.host, f"{shlex.join(self.argv)} did not start within {timeout:g}s"
                )
            else:
                select.select([self.channel], [], [], min(deadline - time.monotonic(), _POLL))
        if not line.strip().isdigit():
            status = self.wait(timeout)
            err = self.stderr.read().decode(errors="replace")
            self.channel.close()
            raise CommandFailed(self.host, self.argv, status, line.decode(errors="replace"), err)
        return int(line)

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
        """End the process: close stdin, wait, then TERM (and KILL) its process group.

        Returns its exit status, or None when it had to be signalled (or
        the connection is gone, which ends it by closing its stdin).
        """
        transport = self.channel.get_transport()
        if transport is None or not transport.is_active():
            self.channel.close()
            return None
        try:
            if not self.channel.closed:
                self.channel.shutdown_write()
            return self.wait(timeout)
        except CommandTimeout:
            self._log.warning(
                "%s did not exit %gs after its stdin closed; sending TERM",
                shlex.join(self.argv),
                timeout,
            )
            self._terminate()
            return None
        finally:
            self.channel.close()

    def _terminate(self) -> None:
        """TERM the process group; KILL it when TERM is ignored.  When the connection cannot
        carry TERM (it stalled), KILL would wait as long for nothing: closing the channel is
        all that is left, and the process's stdin closes with the connection."""
        if not self._kill_group(self.pgid, "TERM"):
            return
        if not self.channel.status_event.wait(_KILL_AFTER):
            self._kill_group(self.pgid, "KILL")

    def __enter__(self) -> RemoteProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
