"""A raw TCP exchange with a port on the data network: bytes an RDMA stack would never send.

``tcp_exchange`` connects (from ``src`` when given), optionally waits,
sends ``data``, reads whatever comes back until the peer closes or the wait
ends, and closes (with a RST when asked).  The regression corpus speaks
malformed MPA to a siw listener this way: siw listens on a kernel TCP
socket, so a plain socket reaches the code that parses MPA requests.
Every step is bounded by the call's timeout.
"""

from __future__ import annotations

import errno
import socket
import struct
import time
from collections.abc import Callable

from ..protocol import MethodName, TcpEnd, TcpExchangeReply
from .errors import OpError
from .hostclock import now_us

MAX_REPLY = 4096  # more than any MPA reply frame with private data


def tcp_exchange(
    address: str,
    port: int,
    data: str,
    timeout: float,
    src: str | None = None,
    delay_s: float = 0.0,
    wait_s: float = 2.0,
    reset: bool = False,
) -> TcpExchangeReply:
    """Connect to ``address:port``, after ``delay_s`` send ``data`` (hex), read for up to
    ``wait_s`` (until the peer closes), then close (``reset``: SO_LINGER 0, a RST)."""
    try:
        payload = bytes.fromhex(data)
    except ValueError:
        raise OpError("bad_params", f"data is not hex: {data[:40]!r}") from None
    if delay_s + wait_s + 1 > timeout:
        raise OpError("bad_params", f"delay_s + wait_s must leave 1 s of the {timeout:g} s call")
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    t0 = now_us()
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.settimeout(max(0.1, timeout - delay_s - wait_s - 0.5))
        try:
            if src:
                sock.bind((src, 0))
            sock.connect((address, port))
        except OSError as e:
            raise OpError(
                "os",
                f"tcp connect to {address}:{port}: {e.strerror}",
                errno=e.errno or 0,
                errno_name=errno.errorcode.get(e.errno or 0, ""),
            ) from None
        connected = now_us()
        here = sock.getsockname()
        local = f"[{here[0]}]:{here[1]}" if family == socket.AF_INET6 else f"{here[0]}:{here[1]}"
        if delay_s:
            time.sleep(delay_s)
        sent_us = now_us()
        sock.sendall(payload)
        reply, ended = _read(sock, wait_s)
        ended_us = now_us()
        if reset:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    return {
        "t_us": t0,
        "local": local,
        "connected_us": connected,
        "sent_us": sent_us,
        "ended_us": ended_us,
        "reply": reply.hex(),
        "ended": ended,
    }


def _read(sock: socket.socket, wait_s: float) -> tuple[bytes, TcpEnd]:
    """What the peer sends within ``wait_s``, and how that ended: ``eof`` (it closed),
    ``reset`` (it aborted) or ``open`` (still open at the end of the wait)."""
    got = b""
    deadline = time.monotonic() + wait_s
    while len(got) < MAX_REPLY:
        left = deadline - time.monotonic()
        if left <= 0:
            return got, "open"
        sock.settimeout(left)
        try:
            chunk = sock.recv(MAX_REPLY - len(got))
        except socket.timeout:  # noqa: UP041 -- not TimeoutError before python 3.10
            return got, "open"
        except ConnectionResetError:
            return got, "reset"
        if not chunk:
            return got, "eof"
        got += chunk
    return got, "open"


METHODS: dict[MethodName, Callable[..., object]] = {"tcp_exchange": tcp_exchange}
