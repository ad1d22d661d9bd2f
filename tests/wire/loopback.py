"""Real traffic on the loopback device, recorded by a real tcpdump, for the decoder's tests.

Needs root (tcpdump on ``lo``) and tcpdump; :func:`unavailable` says why
not, for a skip.  Only 127.0.0.1 and ::1 are used.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

READY_TIMEOUT = 10.0
# Loopback delivers at once; this lets the kernel send what it sends after the socket
# calls returned (a delayed ACK) before the capture ends.
SETTLE = 0.3
# A datagram sent last: once tcpdump has written it, it has written every packet before it
# (a loaded machine may leave it behind after a fixed wait).  Not TCP: decode leaves it out.
MARK = b"hil-loopback-record-end"


def unavailable() -> str | None:
    """Why loopback captures cannot be made here, or None."""
    if os.geteuid() != 0:
        return "recording on lo needs root (tcpdump)"
    if shutil.which("tcpdump") is None:
        return "recording on lo needs tcpdump (ci/install installs it)"
    return None


def free_port(host: str) -> int:
    """A TCP port nothing listens on (bound, then released)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family) as s:
        s.bind((host, 0))
        port: int = s.getsockname()[1]
        return port


def record(path: Path, port: int, action: Callable[[], None]) -> Path:
    """Run ``action`` while tcpdump records TCP port ``port`` on lo into ``path`` (and the
    :data:`MARK` datagram after it)."""
    log = path.with_suffix(".log")
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as mark:
        mark.bind(("127.0.0.1", 0))
        mark_port = mark.getsockname()[1]
        with log.open("w") as err:
            dump = subprocess.Popen(
                ["tcpdump", "-i", "lo", "-U", "--immediate-mode", "-w", str(path)]
                + [f"tcp port {port} or udp port {mark_port}"],
                stdout=subprocess.DEVNULL,
                stderr=err,
            )
        try:
            _wait_listening(dump, log)
            action()
            time.sleep(SETTLE)
            mark.sendto(MARK, mark.getsockname())
            _wait_written(dump, path)
        finally:
            dump.send_signal(signal.SIGINT)
            dump.wait(timeout=10)
    return path


def _wait_written(dump: subprocess.Popen[bytes], path: Path) -> None:
    deadline = time.monotonic() + READY_TIMEOUT
    while MARK not in path.read_bytes():
        if dump.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"tcpdump on lo did not write the last packet to {path}")
        time.sleep(0.01)


def _wait_listening(dump: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + READY_TIMEOUT
    while "listening on" not in log.read_text():
        if dump.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"tcpdump on lo did not start: {log.read_text().strip()}")
        time.sleep(0.05)
