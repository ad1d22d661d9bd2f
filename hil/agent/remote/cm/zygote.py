"""The CM zygote: one pre-imported process per agent that forks the endpoint workers.

A worker started as a new interpreter paid Python's start and every import of
``server.py`` again: 1.7-1.9 s of guest CPU on the virtual lab's TCG guests
(docs/notes/lab-speed.md), for each endpoint a test opens.  The zygote pays it
once (``python3 -I -c`` started by the agent's spawner thread, ``spawn.py``),
then forks a worker for each request.

Protocol on a SOCK_SEQPACKET socket to the agent, one JSON object a packet:
the agent sends ``{"id": N}`` with the child's stdin, stdout and stderr
attached (SCM_RIGHTS); the zygote answers ``{"id": N, "pid": P}`` with a
pidfd of the child attached (opened before the zygote can reap it, so it
names that process and no later one with its pid), or ``{"id": N, "error":
...}``; it reports every child it reaps as ``{"exit": P, "status": S}``
(``S`` as Popen's returncode: negative for a signal).  It exits when the
agent's end closes, and dies with the agent (PR_SET_PDEATHSIG, set here; its
parent thread is the agent's long-lived spawner thread).

Fork safety, checked for server.py's imports (hil_agent.remote.cm.server and
what it imports, librdmacm/ and protocol/ included):

- no import calls into librdmacm or libibverbs: the libraries are loaded
  only by ``Lib()`` (librdmacm/cmabi.py:104-109), made only in
  ``CMChannel.__init__`` (librdmacm/channel.py:41) and ``probe``
  (librdmacm/channel.py:285), which no import runs; the event channel is
  created there too (channel.py:42), and ``ibv_get_device_list`` or
  ``ibv_open_device`` is called nowhere.  So a child holds no verbs context
  or event channel of the zygote's (siw's device deletion waits for its
  users) and opens its own in ``server.main``.  Measured: the zygote's
  /proc/self/maps names neither library (tests/agent/test_cm_zygote.py).
- the zygote stays single-threaded (the imports start no thread; SIGCHLD is
  read through a wakeup fd in its one loop), so a fork copies no lock held by
  another thread; the worker starts its threads after the fork.
- randomness: server.py's imports load neither ``random`` nor ``uuid`` nor
  ``secrets``; ``random`` would reseed itself in a child anyway
  (CPython Lib/random.py, ``os.register_at_fork(after_in_child=_inst.seed)``).
  The children share the zygote's str hash seed, which orders nothing they
  answer.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import select
import signal
import socket
import sys
import traceback
from typing import Any

from . import server  # what every worker imports, done once here

FDS = 3  # a request's fds: the child's stdin, stdout, stderr
PACKET = 4096  # a request or reply is a small JSON object
_PR_SET_PDEATHSIG = 1  # linux/prctl.h


def die_with(parent: int) -> None:
    """SIGKILL us when ``parent`` (our parent thread) dies, even by SIGKILL; exit now if it
    already did (we were reparented between our start and the prctl)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:
        os._exit(1)


def _send(sock: socket.socket, msg: dict[str, Any], fds: list[int] | None = None) -> None:
    data = json.dumps(msg).encode()
    try:
        socket.send_fds(sock, [data], fds or [])
    except OSError:
        os._exit(1)  # the agent is gone


def _reap(sock: socket.socket) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        _send(sock, {"exit": pid, "status": os.waitstatus_to_exitcode(status)})


def _close_above_stderr() -> None:
    # The open fds, not closerange(3, SC_OPEN_MAX): before 3.10 CPython closes each of
    # a million numbers in turn, and every syscall is slow on a TCG guest.
    for name in os.listdir("/proc/self/fd"):
        if int(name) > 2:
            with contextlib.suppress(OSError):  # listdir's own fd, closed already
                os.close(int(name))


def _child(zygote: int, sock: socket.socket, fds: list[int]) -> None:
    """In the forked child: a session of its own, death with the zygote, the agent's pipes
    as 0/1/2 and no other fd, then the worker."""
    try:
        os.setsid()
        die_with(zygote)
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        sock.close()
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        _close_above_stderr()
        server.main()  # exits itself
    except BaseException:  # noqa: BLE001 -- a forked child must never return to the loop
        traceback.print_exc()  # to the agent's stderr pipe, the tail it reports
    finally:
        os._exit(1)


def _fork(sock: socket.socket, rid: object, fds: list[int]) -> None:
    sys.stdout.flush()
    sys.stderr.flush()  # nothing of ours left in a buffer the child would write out
    zygote = os.getpid()
    try:
        if len(fds) != FDS:
            raise OSError(0, f"{len(fds)} fds received, not {FDS}")
        pid = os.fork()
    except OSError as e:
        _send(sock, {"id": rid, "error": f"fork: {e.strerror}"})
        return
    finally:
        if os.getpid() == zygote:
            for fd in fds:
                os.close(fd)
    if pid == 0:
        _child(zygote, sock, fds)
    try:
        pidfd = os.pidfd_open(pid)
    except OSError as e:  # Linux < 5.3: no pidfds
        os.kill(pid, signal.SIGKILL)
        _send(sock, {"id": rid, "error": f"pidfd_open: {e.strerror}"})
        return
    _send(sock, {"id": rid, "pid": pid}, [pidfd])
    os.close(pidfd)


def main(sock_fd: int, agent: int) -> None:
    """Serve fork requests on ``sock_fd`` until the agent (pid ``agent``) closes it."""
    die_with(agent)
    sock = socket.socket(fileno=sock_fd)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # a handler, so the wakeup fd is written
    signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
    poll = select.poll()
    poll.register(sock, select.POLLIN)
    poll.register(wake_r, select.POLLIN)
    while True:
        for fd, _ in poll.poll():
            if fd == wake_r:
                os.read(wake_r, PACKET)
                _reap(sock)
                continue
            data, fds, _, _ = socket.recv_fds(sock, PACKET, FDS)
            if not data:
                os._exit(0)  # the agent closed its end
            _fork(sock, json.loads(data).get("id"), fds)
