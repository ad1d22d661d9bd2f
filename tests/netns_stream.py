"""A TCP stream between two netns lab hosts, to see a link pull cut traffic.

The receiver runs in one host's namespace and prints the running byte count;
the sender, in the other, writes a steady trickle.  Both are started with
``ip netns exec`` from the test process and killed when the stream closes.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from typing import Self

from netnslab.lab import NetnsLab

PORT = 47001
_RECEIVER = """
import socket, sys, time
srv = socket.socket()
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind((sys.argv[1], int(sys.argv[2])))
srv.listen(1)
print("listening", flush=True)
conn, _ = srv.accept()
total = 0
while True:
    data = conn.recv(65536)
    if not data:
        break
    total += len(data)
    print(total, flush=True)
"""
_SENDER = """
import socket, sys, time
conn = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=10)
chunk = b"x" * 4096
while True:
    conn.sendall(chunk)
    time.sleep(0.01)
"""


class Stream:
    """Receiver in host ``dst``, sender in host ``src``; ``total`` bytes received so far."""

    def __init__(self, lab: NetnsLab, src: int, dst: int, address: str) -> None:
        self.total = 0
        self._procs: list[subprocess.Popen[str]] = []
        recv = self._start(lab, dst, _RECEIVER, address)
        assert recv.stdout is not None
        if recv.stdout.readline().strip() != "listening":
            self.close()
            raise AssertionError("the stream's receiver did not start")
        threading.Thread(target=self._count, args=(recv,), daemon=True).start()
        self._start(lab, src, _SENDER, address)

    def _start(self, lab: NetnsLab, host: int, script: str, address: str) -> subprocess.Popen[str]:
        argv = [
            "ip",
            "netns",
            "exec",
            lab.hosts[host].netns,
            sys.executable,
            "-c",
            script,
            address,
            str(PORT),
        ]
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self._procs.append(proc)
        return proc

    def _count(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            self.total = int(line)

    def flowing(self, within: float) -> bool:
        """True when more bytes arrive within ``within`` seconds."""
        start = self.total
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            if self.total > start:
                return True
            time.sleep(0.05)
        return False

    def stalled(self, watch: float = 2.0, within: float = 20.0) -> bool:
        """True when nothing arrives for ``watch`` seconds, once what was in flight has been
        counted (within ``within``).  A stream that still flows never goes quiet that long;
        a receiver slowed by a loaded machine may still be reading what was in flight after
        any fixed settle."""
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            if not self.flowing(watch):
                return True
        return False

    def close(self) -> None:
        """Kill both ends (their namespaces stay to the lab)."""
        for proc in self._procs:
            proc.kill()
            proc.wait(timeout=10)
            if proc.stdout:
                proc.stdout.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
