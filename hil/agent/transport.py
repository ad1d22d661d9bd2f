"""How the client reaches a running agent: a byte pipe in, lines out, stderr kept.

``Channel`` is the interface the client needs.  ``LocalChannel`` runs the
agent as a local subprocess (tests, ``ip netns exec``); ``SSHChannel`` wraps
a process started on the SSH connection (``SSHSession.open_process``).
"""

from __future__ import annotations

import collections
import subprocess
import threading
from typing import Protocol

from hil.errors import CommandTimeout, SSHError
from hil.ssh import RemoteProcess

STDERR_TAIL_LINES = 20


class Channel(Protocol):
    """A started agent process as the client sees it."""

    def write(self, data: bytes) -> None:
        """Send bytes to the agent's stdin (raises OSError when it is gone)."""

    def readline(self) -> bytes:
        """One line from the agent's stdout; b"" at end of stream."""

    def stderr_tail(self) -> str:
        """The last lines the agent wrote to stderr."""

    def exit_status(self, wait: float = 0.0) -> int | None:
        """The agent's exit status, waiting up to ``wait`` for it; None if running."""

    def close(self, timeout: float) -> None:
        """Close stdin (the agent then exits), wait up to ``timeout``, then kill."""


class _ByteStream(Protocol):
    """A stream of bytes read by lines: a pipe, or an SSH channel's stderr file."""

    def readline(self) -> bytes: ...

    def close(self) -> None: ...


class _StderrTail:
    """Drains a stderr stream in a thread, keeping its last lines."""

    def __init__(self, stream: _ByteStream) -> None:
        self._lines: collections.deque[str] = collections.deque(maxlen=STDERR_TAIL_LINES)
        self._stream = stream
        self._thread = threading.Thread(target=self._drain, args=(stream,), daemon=True)
        self._thread.start()

    def _drain(self, stream: _ByteStream) -> None:
        for line in iter(stream.readline, b""):
            self._lines.append(line.decode("utf-8", errors="replace").rstrip())

    def close(self, timeout: float) -> None:
        """Wait for the stream to end (its process exited), then close it."""
        self._thread.join(timeout)
        self._stream.close()

    def text(self, settle: float = 0.2) -> str:
        # A dying agent's last words may still be in the pipe: let the drain finish.
        self._thread.join(settle)
        return "\n".join(self._lines)


class LocalChannel:
    """The agent as a local subprocess (``argv`` ends with the .pyz path)."""

    def __init__(self, argv: list[str]) -> None:
        self.argv = argv
        self._proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        assert self._proc.stdin and self._proc.stdout and self._proc.stderr
        self._stdin, self._stdout = self._proc.stdin, self._proc.stdout
        self._stderr = _StderrTail(self._proc.stderr)

    def write(self, data: bytes) -> None:
        self._stdin.write(data)
        self._stdin.flush()

    def readline(self) -> bytes:
        return self._stdout.readline()

    def stderr_tail(self) -> str:
        return self._stderr.text()

    def exit_status(self, wait: float = 0.0) -> int | None:
        try:
            return self._proc.wait(wait)
        except subprocess.TimeoutExpired:
            return None

    def close(self, timeout: float) -> None:
        try:
            self._stdin.close()
        except OSError:
            pass  # already gone: nothing left to tell it
        try:
            self._proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        self._stdout.close()
        self._stderr.close(timeout)


class SSHChannel:
    """The agent as a process on an SSH exec channel (``hil.ssh.RemoteProcess``)."""

    def __init__(self, process: RemoteProcess) -> None:
        self._process = process
        self._stdout = process.stdout
        self._stderr = _StderrTail(process.stderr)

    def write(self, data: bytes) -> None:
        try:
            self._process.write(data)
        except SSHError as e:
            raise OSError(str(e)) from None

    def readline(self) -> bytes:
        line: bytes = self._stdout.readline()  # paramiko's files are untyped (Any)
        return line

    def stderr_tail(self) -> str:
        return self._stderr.text()

    def exit_status(self, wait: float = 0.0) -> int | None:
        try:
            status = self._process.wait(wait)
        except CommandTimeout:
            return None
        # paramiko's -1: the channel closed without an exit status (a lost connection).
        return None if status < 0 else status

    def close(self, timeout: float) -> None:
        self._process.close(timeout)
