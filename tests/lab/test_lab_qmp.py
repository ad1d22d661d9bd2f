"""The QMP client, against a scripted unix-socket server and a real QEMU."""

from __future__ import annotations

import json
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hil.lab import qmp
from hil.lab.qmp import QMPClient, QMPError

GREETING: dict[str, Any] = {"QMP": {"version": {}, "capabilities": []}}


class FakeQMP(threading.Thread):
    """Answers each command with the next scripted reply (None: stay silent)."""

    def __init__(self, path: Path, replies: list[list[dict[str, Any]] | None]) -> None:
        super().__init__(daemon=True)
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(str(path))
        self.server.listen(1)
        self.replies = replies
        self.received: list[dict[str, Any]] = []

    def run(self) -> None:
        with self.server:
            conn, _ = self.server.accept()
        with conn, conn.makefile("rwb") as f:
            f.write(json.dumps(GREETING).encode() + b"\n")
            f.flush()
            for line in f:
                self.received.append(json.loads(line))
                reply = self.replies.pop(0) if self.replies else None
                if reply is None:
                    time.sleep(3)
                    return
                for msg in reply:
                    f.write(json.dumps(msg).encode() + b"\n")
                f.flush()


@pytest.fixture
def sock_path(tmp_path: Path) -> Path:
    return tmp_path / "q.qmp"


def serve(path: Path, replies: list[list[dict[str, Any]] | None]) -> FakeQMP:
    server = FakeQMP(path, replies)
    server.start()
    return server


def test_set_link_negotiates_then_sends_the_command(sock_path: Path) -> None:
    server = serve(sock_path, [[{"return": {}}], [{"return": {}}]])
    qmp.set_link(str(sock_path), "data0", False, timeout=5)
    server.join(5)
    assert server.received == [
        {"execute": "qmp_capabilities"},
        {"execute": "set_link", "arguments": {"name": "data0", "up": False}},
    ]


def test_events_between_replies_are_skipped(sock_path: Path) -> None:
    event = {"event": "NIC_RX_FILTER_CHANGED", "data": {}, "timestamp": {}}
    serve(sock_path, [[{"return": {}}], [event, event, {"return": {"status": "running"}}]])
    with QMPClient(str(sock_path), timeout=5) as c:
        assert c.execute("query-status") == {"status": "running"}


def test_error_reply_raises_with_qemus_description(sock_path: Path) -> None:
    error = {"error": {"class": "DeviceNotFound", "desc": "Device 'data9' not found"}}
    serve(sock_path, [[{"return": {}}], [error]])
    with pytest.raises(QMPError, match="set_link failed: Device 'data9' not found"):
        qmp.set_link(str(sock_path), "data9", True, timeout=5)


def test_a_silent_qemu_times_out_instead_of_hanging(sock_path: Path) -> None:
    serve(sock_path, [[{"return": {}}], None])
    with QMPClient(str(sock_path), timeout=5) as c:
        started = time.monotonic()
        with pytest.raises(QMPError, match="no answer within the timeout"):
            c.execute("query-status", timeout=0.5)
        assert time.monotonic() - started < 3


def test_no_socket_names_the_path_and_what_to_do(sock_path: Path) -> None:
    with pytest.raises(QMPError, match=rf"{sock_path}: cannot connect .*hil lab status"):
        QMPClient(str(sock_path), timeout=1)


def test_a_socket_bound_but_not_yet_listening_is_waited_for(sock_path: Path) -> None:
    # QEMU's window between bind and listen, widened to 0.3 s.
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(sock_path))

    def listen_late() -> None:
        time.sleep(0.3)
        server.listen(1)
        conn, _ = server.accept()
        with conn, conn.makefile("rwb") as f:
            f.write(json.dumps(GREETING).encode() + b"\n")
            f.flush()
            f.readline()
            f.write(b'{"return": {}}\n')
            f.flush()
            f.readline()

    threading.Thread(target=listen_late, daemon=True).start()
    with server, QMPClient(str(sock_path), timeout=5):
        pass


def test_a_refused_socket_is_an_error_within_the_retry(sock_path: Path) -> None:
    # A socket left by a QEMU that died: bound, never listening.
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as dead:
        dead.bind(str(sock_path))
        started = time.monotonic()
        with pytest.raises(QMPError, match=rf"{sock_path}: cannot connect .*refused"):
            QMPClient(str(sock_path), timeout=10)
        assert time.monotonic() - started < qmp.REFUSED_RETRY + 2


@pytest.fixture
def paused_qemu(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """A real QEMU with a data NIC, paused before any guest code (no kernel needed)."""
    path = str(tmp_path / "real.qmp")
    proc = subprocess.Popen(
        [
            "qemu-system-x86_64",
            "-M",
            "q35",
            "-S",
            "-display",
            "none",
            "-nodefaults",
            "-accel",
            "tcg",
            "-netdev",
            "user,id=data0,restrict=on",
            "-device",
            "virtio-net-pci,netdev=data0",
            "-qmp",
            f"unix:{path},server=on,wait=off",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 20
        while not Path(path).exists():
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            assert time.monotonic() < deadline, "QEMU made no QMP socket in 20 s"
            time.sleep(0.05)
        yield proc, path
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)
        if proc.stderr:
            proc.stderr.close()


def test_real_qemu_set_link_and_quit(paused_qemu: tuple[subprocess.Popen[bytes], str]) -> None:
    proc, path = paused_qemu
    qmp.set_link(path, "data0", False, timeout=10)
    qmp.set_link(path, "data0", True, timeout=10)
    with pytest.raises(QMPError, match="data9"):
        qmp.set_link(path, "data9", False, timeout=10)
    qmp.quit_qemu(path, timeout=10)
    assert proc.wait(10) == 0
