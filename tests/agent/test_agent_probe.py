"""The raw TCP exchange (hil/agent/remote/probe.py) against real sockets on 127.0.0.1.

The regression corpus sends malformed MPA to siw with it (suites/test_regressions.py);
here a local server plays the peer: it answers and closes, resets, or stays silent.
"""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Callable, Iterator

import pytest

from hil.agent import protocol
from hil.agent.remote.errors import OpError
from hil.agent.remote.probe import tcp_exchange

Peer = Callable[[socket.socket], None]


@pytest.fixture
def serve() -> Iterator[Callable[[Peer], int]]:
    """``serve(peer)``: a listening port whose first connection ``peer`` handles."""
    socks: list[socket.socket] = []
    threads: list[threading.Thread] = []

    def start(peer: Peer) -> int:
        srv = socket.create_server(("127.0.0.1", 0))
        socks.append(srv)

        def run() -> None:
            conn, _ = srv.accept()
            with conn:
                peer(conn)

        t = threading.Thread(target=run, daemon=True)
        t.start()
        threads.append(t)
        return int(srv.getsockname()[1])

    yield start
    for t in threads:
        t.join(5)
    for s in socks:
        s.close()


def answer_and_close(conn: socket.socket) -> None:
    assert conn.recv(20) == b"MPA ID Req Frame" + struct.pack(">HH", 0x8001, 0)
    conn.sendall(b"MPA ID Rep Frame" + struct.pack(">HH", 0x2001, 0))


def reset(conn: socket.socket) -> None:
    conn.recv(20)
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


SEEN: list[str] = []  # how the silent peer's connection ended


def silent(conn: socket.socket) -> None:
    conn.recv(20)
    try:
        SEEN.append("eof" if conn.recv(1) == b"" else "data")  # until the client closes
    except ConnectionResetError:
        SEEN.append("reset")


REQUEST = (b"MPA ID Req Frame" + struct.pack(">HH", 0x8001, 0)).hex()


def test_the_answer_and_the_peers_close_come_back(serve: Callable[[Peer], int]) -> None:
    got = tcp_exchange("127.0.0.1", serve(answer_and_close), REQUEST, timeout=5, wait_s=2)
    assert bytes.fromhex(got["reply"]) == b"MPA ID Rep Frame" + struct.pack(">HH", 0x2001, 0)
    assert got["ended"] == "eof"
    assert got["t_us"] <= got["connected_us"] <= got["sent_us"] <= got["ended_us"]
    protocol.check(protocol.TcpExchangeReply, got, strict=True)  # the reply as declared


def test_a_reset_is_told_from_a_close(serve: Callable[[Peer], int]) -> None:
    got = tcp_exchange("127.0.0.1", serve(reset), REQUEST, timeout=5, wait_s=2)
    assert got["ended"] == "reset" and got["reply"] == ""


def test_a_silent_peer_ends_the_read_at_the_wait(serve: Callable[[Peer], int]) -> None:
    got = tcp_exchange("127.0.0.1", serve(silent), REQUEST, timeout=5, wait_s=0.3, delay_s=0.1)
    assert got["ended"] == "open"
    assert got["sent_us"] - got["connected_us"] >= 100_000  # the asked delay
    assert got["ended_us"] - got["sent_us"] >= 300_000


def test_reset_closes_with_a_rst_else_a_fin(serve: Callable[[Peer], int]) -> None:
    SEEN.clear()
    tcp_exchange("127.0.0.1", serve(silent), REQUEST, timeout=5, wait_s=0.1, reset=True)
    tcp_exchange("127.0.0.1", serve(silent), REQUEST, timeout=5, wait_s=0.1)
    for _ in range(50):
        if len(SEEN) == 2:
            break
        threading.Event().wait(0.05)
    assert sorted(SEEN) == ["eof", "reset"]


def test_bad_input_and_a_refused_connect_are_clear_errors() -> None:
    with pytest.raises(OpError, match="data is not hex"):
        tcp_exchange("127.0.0.1", 9, "zz", timeout=5)
    with pytest.raises(OpError, match="must leave 1 s"):
        tcp_exchange("127.0.0.1", 9, "", timeout=2, wait_s=2)
    free = socket.create_server(("127.0.0.1", 0))
    port = free.getsockname()[1]
    free.close()  # nobody listens there now
    with pytest.raises(OpError, match=rf"tcp connect to 127.0.0.1:{port}: Connection refused"):
        tcp_exchange("127.0.0.1", port, "", timeout=5)
