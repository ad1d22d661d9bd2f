"""Commands and sysctls on the host.

Every child runs in its own session (process group), is registered while it
runs, and is killed with its whole group when its timeout passes or when the
agent exits, so nothing the agent started outlives it.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
from collections.abc import Callable

from ..protocol import MethodName, PingReply, RunReply
from .errors import OpError

_children: set[subprocess.Popen[bytes]] = set()
_children_lock = threading.Lock()
_closed = False  # set by kill_children: the agent is exiting and starts nothing more
# A sysctl name: dotted (net.ipv4.ip_forward) or slashed (net/ipv4/conf/eth0.100/rp_filter).
_SYSCTL_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.:@/-]*$")
_OUTPUT_LIMIT = 4 * 1024 * 1024


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def kill_children() -> None:
    """Kill every process group the agent started and still runs, and start no more."""
    global _closed
    with _children_lock:
        _closed = True
        procs = list(_children)
    for proc in procs:
        _kill_group(proc)


def _text(data: bytes) -> str:
    return data[-_OUTPUT_LIMIT:].decode("utf-8", errors="replace")


def _start(argv: list[str], with_input: bool) -> subprocess.Popen[bytes]:
    """Start ``argv`` in its own process group, registered as a child before anyone can
    look: started under the children's lock, so an exiting agent kills it or refuses it."""
    with _children_lock:
        if _closed:
            raise OpError("os", f"the agent is exiting and does not start {argv[0]}", argv=argv)
        try:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE if with_input else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
            )
        except OSError as e:
            raise OpError(
                "os", f"cannot start {argv[0]}: {e.strerror}", errno=e.errno, argv=argv
            ) from None
        _children.add(proc)
    return proc


def run(argv: list[str], timeout: float, input: str | None = None) -> RunReply:
    """Run ``argv`` (no shell) and return its status, stdout and stderr."""
    if not argv or not all(isinstance(a, str) for a in argv):
        raise OpError("bad_params", "argv must be a non-empty list of strings", argv=argv)
    proc = _start(argv, input is not None)
    try:
        out, err = proc.communicate(input.encode() if input is not None else None, timeout)
    except subprocess.TimeoutExpired as e:
        _kill_group(proc)
        out, err = proc.communicate()
        raise OpError(
            "timeout",
            f"{' '.join(argv)} still ran after {timeout:g}s and was killed",
            argv=argv,
            stdout=_text(e.stdout or out or b""),
            stderr=_text(e.stderr or err or b""),
        ) from None
    finally:
        with _children_lock:
            _children.discard(proc)
    return {"status": proc.returncode, "stdout": _text(out), "stderr": _text(err)}


def sysctl_path(name: str) -> str:
    """The /proc/sys file of sysctl ``name``; dots or slashes separate levels."""
    if not _SYSCTL_NAME.match(name) or ".." in name.split("/") or "/." in name:
        raise OpError("bad_params", f"not a sysctl name: {name!r}", name=name)
    rel = name if "/" in name else name.replace(".", "/")
    return "/proc/sys/" + rel


def _read(path: str, name: str) -> str:
    try:
        with open(path) as f:
            return f.read().strip()
    except FileNotFoundError:
        raise OpError("not_found", f"no sysctl {name} ({path} does not exist)", name=name) from None
    except OSError as e:
        raise OpError(
            "os", f"cannot read sysctl {name}: {e.strerror}", errno=e.errno, name=name
        ) from None


def sysctl_get(name: str) -> str:
    """The current value of sysctl ``name``, whitespace-trimmed."""
    return _read(sysctl_path(name), name)


def sysctl_set(name: str, value: str) -> str:
    """Set sysctl ``name`` to ``value``; returns the old value for a restore."""
    path = sysctl_path(name)
    old = _read(path, name)
    try:
        with open(path, "w") as f:
            f.write(str(value))
    except OSError as e:
        raise OpError(
            "os",
            f"cannot set sysctl {name}={value}: {e.strerror}",
            errno=e.errno,
            name=name,
            value=value,
        ) from None
    return old


def ping() -> PingReply:
    """A no-op round trip: the agent's pid, for health checks and benchmarks."""
    return {"pid": os.getpid()}


METHODS: dict[MethodName, Callable[..., object]] = {
    "ping": ping,
    "run": run,
    "sysctl_get": sysctl_get,
    "sysctl_set": sysctl_set,
}
