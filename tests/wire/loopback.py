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
# Loopback delivers at once; this lets tcpdump write the last packet before it is stopped.
SETTLE = 0.3


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
    """Run ``action`` while tcpdump records TCP port ``port`` on lo into ``path``."""
    log = path.with_suffix(".log")
    with log.open("w") as err:
        dump = subprocess.Popen(
            ["tcpdump", "-i", "lo", "-U", "--immediate-mode", "-w", str(path), f"tcp port {port}"],
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    try:
        _wait_listening(dump, log)
        action()
        time.sleep(SETTLE)
    finally:
        dump.send_signal(signal.SIGINT)
        dump.wait(timeout=10)
    return path


def _wait_listening(dump: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + READY_TIMEOUT
    while "listening on" not in log.read_text():
        if dump.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"tcpdump on lo did not start: {log.read_text().strip()}")
        time.sleep(0.05)
