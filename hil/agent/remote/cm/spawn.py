"""The agent's end of the CM zygote (``zygote.py``): started on first use, asked to fork.

The zygote is started from one long-lived thread (:class:`_Spawner`) so that
PR_SET_PDEATHSIG ties it to the agent, not to a request's thread; its workers
die with it in turn.  A reader thread takes the zygote's answers (a child's
pid and pidfd) and the exit status of every child it reaps, and keeps the
tail of its stderr for the error that tells it died.  A zygote found dead is
started again by the next fork.
"""

from __future__ import annotations

import collections
import contextlib
import json
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
from typing import IO, Any

from ..errors import OpError

# Where the agent's own hil_agent package was imported from, for the zygote's sys.path:
# the unpacked copy beside the zipapp (zipmain.py), whose bytecode Python caches, or the
# zip itself where no copy could be made.  From the zip (sys.argv[0]) every module would
# be compiled again at each start.  This file is hil_agent/remote/cm/spawn.py there.
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
_BOOT = (
    "import sys; sys.path.insert(0, sys.argv[1]); "
    "from hil_agent.remote.cm.zygote import main; main(int(sys.argv[2]), int(sys.argv[3]))"
)
# How long a fork may wait for the zygote's answer: its start included, python's imports
# on a loaded debug lab's TCG guest (over 20 s for a whole worker, methods.START_MARGIN).
FORK_TIMEOUT = 120.0
EXIT_REPORT_S = 2.0  # a child's exit reaches us this long after its pidfd said so, at most


class _Spawner:
    """Starts processes from one thread that lives as long as the agent.

    PR_SET_PDEATHSIG fires when the parent THREAD exits, and each agent
    request runs in a short-lived thread: a process started there would be
    killed as soon as its request returned.
    """

    def __init__(self) -> None:
        self._jobs: queue.Queue[tuple[list[str], int, queue.Queue[Any]]] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def popen(self, argv: list[str], fd: int) -> subprocess.Popen[bytes]:
        """``argv`` started with stderr to a pipe and ``fd`` passed on, from the thread."""
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._serve, daemon=True)
                self._thread.start()
        done: queue.Queue[subprocess.Popen[bytes] | OSError] = queue.Queue()
        self._jobs.put((argv, fd, done))
        started = done.get()
        if isinstance(started, OSError):
            raise started
        return started

    def _serve(self) -> None:
        while True:
            argv, fd, done = self._jobs.get()
            try:
                done.put(
                    subprocess.Popen(
                        argv,
                        stdin=subprocess.DEVNULL,
                        stdout=subprocess.DEVNULL,
                        stderr=subprocess.PIPE,
                        pass_fds=(fd,),
                        start_new_session=True,
                    )
                )
            except OSError as e:
                done.put(e)


_spawner = _Spawner()


class StderrTail:
    """The last lines a process wrote to its stderr pipe, read by a thread of its own."""

    def __init__(self, pipe: IO[bytes]) -> None:
        self._pipe = pipe
        self._lines: collections.deque[str] = collections.deque(maxlen=20)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        with self._pipe:
            for line in self._pipe:
                self._lines.append(line.decode("utf-8", "replace").rstrip())

    def suffix(self, settle: float = 0.0) -> str:
        """``": "`` and its last three lines, or "" if it wrote none; waits up to
        ``settle`` for the rest of what an exited process wrote."""
        self._reader.join(settle)
        tail = " / ".join(list(self._lines)[-3:])
        return f": {tail}" if tail else ""


class Zygote:
    """One running zygote: its socket, the answer a fork waits for, its children's exits."""

    def __init__(self, root: str = ROOT) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        # -S as the agent itself (hil/agent/agent.py): no site module to import.
        argv = [sys.executable, "-IS", "-c", _BOOT, root, str(theirs.fileno()), str(os.getpid())]
        try:
            self.proc = _spawner.popen(argv, theirs.fileno())
        except OSError:
            ours.close()
            raise
        finally:
            theirs.close()
        self.pid = self.proc.pid
        self._sock = ours
        self._answers: queue.Queue[tuple[dict[str, Any], list[int]] | None] = queue.Queue()
        self._exits: dict[int, int] = {}
        self._cond = threading.Condition()
        self.dead = False
        assert self.proc.stderr is not None
        self._stderr = StderrTail(self.proc.stderr)
        self._next = 1
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        while True:
            try:
                data, fds, _, _ = socket.recv_fds(self._sock, 4096, 1)
            except OSError:
                data, fds = b"", []
            if not data:
                break
            msg = json.loads(data)
            if "exit" in msg:
                with self._cond:
                    self._exits[msg["exit"]] = msg["status"]
                    self._cond.notify_all()
                continue
            if "pid" in msg:
                with self._cond:  # a report left over from an earlier child with this pid
                    self._exits.pop(msg["pid"], None)
            self._answers.put((msg, fds))
        self._sock.close()
        with self._cond:
            self.dead = True
            self._cond.notify_all()
        self._answers.put(None)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(5)  # reaped, not left a zombie

    def _failed(self, what: str) -> OpError:
        try:
            status: int | None = self.proc.wait(2)
        except subprocess.TimeoutExpired:
            status = None
        return OpError(
            "os",
            f"the CM zygote (pid {self.pid}) {what} (exit status {status})"
            f"{self._stderr.suffix(2 if status is not None else 0)}",
            pid=self.pid,
            status=status,
        )

    def fork(self, fds: list[int], timeout: float) -> tuple[int, int]:
        """A child with ``fds`` as its stdin, stdout, stderr: its pid and a pidfd of it.

        Not thread-safe: the caller serializes forks (:func:`fork`)."""
        rid, self._next = self._next, self._next + 1
        try:
            socket.send_fds(self._sock, [json.dumps({"id": rid}).encode()], fds)
        except OSError:
            raise self._failed("is gone") from None
        while True:
            try:
                answer = self._answers.get(timeout=timeout)
            except queue.Empty:
                # A hung zygote would hold every later open for as long: it goes, and its
                # workers with it (their opens fail naming it); the next fork starts another.
                self._kill()
                raise self._failed(
                    f"did not fork within {timeout:g}s; killed it, the next open starts another"
                ) from None
            if answer is None:
                self._answers.put(None)  # for the next fork, which must fail as well
                raise self._failed("died")
            msg, pidfds = answer
            if msg.get("id") == rid:
                break
            for pidfd in pidfds:  # a fork we gave up waiting for: its child is no one's
                with contextlib.suppress(ProcessLookupError):
                    signal.pidfd_send_signal(pidfd, signal.SIGKILL)
                os.close(pidfd)
        if "error" in msg or len(pidfds) != 1:
            raise OpError("os", f"the CM zygote (pid {self.pid}) cannot fork: {msg.get('error')}")
        return int(msg["pid"]), pidfds[0]

    def _kill(self) -> None:
        with self._cond:
            self.dead = True
            self._cond.notify_all()
        with contextlib.suppress(ProcessLookupError):
            self.proc.kill()

    def exit_status(self, pid: int) -> int | None:
        """The exit status of child ``pid``, which exited; None if the zygote did not say."""
        with self._cond:
            self._cond.wait_for(lambda: pid in self._exits or self.dead, EXIT_REPORT_S)
            return self._exits.pop(pid, None)


_zygote: Zygote | None = None
_lock = threading.Lock()


def fork(fds: list[int]) -> tuple[Zygote, int, int]:
    """A child forked from the agent's zygote (started now if there is none or it died)
    with ``fds`` as its stdin, stdout and stderr: the zygote, the pid and a pidfd."""
    global _zygote
    with _lock:
        if _zygote is None or _zygote.dead:
            _zygote = Zygote()
        pid, pidfd = _zygote.fork(fds, FORK_TIMEOUT)
        return _zygote, pid, pidfd
