"""Clock probes between the two hosts of a pair: stamped UDP datagrams over the data link.

The controller's own estimate of a host's clock (``cm_now`` over SSH) is
only as good as half an SSH round trip: milliseconds on a TCG guest.  Two
hosts of a pair are one data link apart, so they can do far better between
themselves, NTP-style: host A sends a probe stamped ``t1`` (its
CLOCK_MONOTONIC), host B stamps its arrival ``t2`` and its answer ``t3``,
A stamps the answer's arrival ``t4``.  B's clock minus A's then lies in
``[t3 - t4, t2 - t1]`` (the probe left after t1 and reached B before t2;
the answer left B after t3 and reached A before t4), a window as wide as
the round trip minus B's turnaround.  The controller keeps the tightest
(``hil.cm.clock.relative``).

``clock_echo`` (on B) answers probes on ``address:port`` until the prober
says stop or ``timeout``; ``clock_probe`` (on A) sends probes one after the
other, each waiting up to ``PROBE_WAIT_S`` for its answer, until ``count``
were answered or ``timeout``, and returns every answered probe's four
stamps.  The two run as two agent calls at once; a probe sent before the
echo is bound is refused or lost and sent again, within the call's timeout.

Stamps are taken in user space right after ``recvfrom`` and right before
``sendto``: scheduling delays only widen a sample's window, never shift it
past the truth, so the bounds above hold whatever the load.
"""

from __future__ import annotations

import errno
import socket
import struct
import time
from collections.abc import Callable
from typing import Any

from .errors import OpError
from .protocol import ClockEchoReply, ClockProbeReply, MethodName

PROBE_WAIT_S = 0.05  # one probe's answer: the link's round trip is well under 1 ms
MAX_COUNT = 2000
# A probe: magic, kind, sequence number, t1.  An answer: the probe's fields, t2, t3.
_PROBE = struct.Struct("!4sBIq")
_ANSWER = struct.Struct("!4sBIqqq")
_MAGIC = b"hilC"
_KIND_PROBE, _KIND_STOP, _KIND_ANSWER = 1, 2, 3
_STOPS = 3  # stop datagrams sent at the end (UDP: one may be lost)


def now_us() -> int:
    """This host's CLOCK_MONOTONIC in µs (the time base of every CM stamp)."""
    return time.monotonic_ns() // 1000


def _socket(address: str, port: int, what: str) -> socket.socket:
    try:
        family, _, _, _, sockaddr = socket.getaddrinfo(
            address, port, type=socket.SOCK_DGRAM, flags=socket.AI_NUMERICHOST
        )[0]
    except socket.gaierror as e:
        raise OpError("bad_params", f"{what}: {address!r} is not an IP address: {e}") from None
    sock = socket.socket(family, socket.SOCK_DGRAM)
    return _bound(sock, sockaddr, what)


def _bound(sock: socket.socket, sockaddr: tuple[object, ...], what: str) -> socket.socket:
    try:
        sock.bind(sockaddr)
    except OSError as e:
        sock.close()
        raise OpError(
            "os", f"{what}: cannot bind {sockaddr[0]}:{sockaddr[1]}: {e.strerror}", errno=e.errno
        ) from None
    return sock


def clock_echo(address: str, port: int, timeout: float) -> ClockEchoReply:
    """Answer clock probes on ``address:port`` (UDP) until the prober stops us or ``timeout``."""
    deadline = time.monotonic() + timeout
    answered = 0
    with _socket(address, port, "clock_echo") as sock:
        while True:
            got = _recv_spin(sock, deadline)
            t2 = now_us()
            if got is None:
                break
            data, peer = got
            if len(data) != _PROBE.size:
                continue
            magic, kind, seq, t1 = _PROBE.unpack(data)
            if magic != _MAGIC:
                continue
            if kind == _KIND_STOP:
                break
            if kind == _KIND_PROBE:
                sock.sendto(_ANSWER.pack(_MAGIC, _KIND_ANSWER, seq, t1, t2, now_us()), peer)
                answered += 1
    return {"answered": answered}


def clock_probe(src: str, dst: str, port: int, count: int, timeout: float) -> ClockProbeReply:
    """Send ``count`` probes from ``src`` to the echo at ``dst:port``; every answered
    probe's stamps ``[t1, t2, t3, t4]`` (t2, t3 on the echo's clock)."""
    if not 1 <= count <= MAX_COUNT:
        raise OpError("bad_params", f"clock_probe: count must be 1..{MAX_COUNT}, not {count}")
    deadline = time.monotonic() + timeout
    samples: list[list[int]] = []
    sent = 0
    with _socket(src, 0, "clock_probe") as sock:
        target = (dst, port)
        try:
            sock.connect(target)
        except OSError as e:
            raise OpError("os", f"clock_probe: {dst}:{port}: {e.strerror}", errno=e.errno) from None
        while len(samples) < count and time.monotonic() < deadline:
            sent += 1
            got = _exchange(sock, sent, min(PROBE_WAIT_S, max(0.0, deadline - time.monotonic())))
            if got is not None:
                samples.append(got)
        for _ in range(_STOPS):
            _send(sock, _PROBE.pack(_MAGIC, _KIND_STOP, 0, 0))
    return {"samples": samples, "sent": sent}


def _recv_spin(sock: socket.socket, deadline: float) -> tuple[bytes, Any] | None:
    """The next datagram, or None at ``deadline`` (``time.monotonic``).

    Spins on a non-blocking socket rather than sleeping in poll: waking a
    sleeping process (and, on a virtual machine, its idle vCPU) costs more
    than the link's round trip, and every µs of it widens the windows.  An
    exchange lasts a fraction of a second.
    """
    sock.setblocking(False)
    while True:
        try:
            return sock.recvfrom(64)
        except BlockingIOError:
            if time.monotonic() >= deadline:
                return None


def _send(sock: socket.socket, data: bytes) -> bool:
    """Send one datagram; False when the echo is not there (yet): ICMP port unreachable."""
    try:
        sock.send(data)
    except OSError as e:
        if e.errno in (errno.ECONNREFUSED, errno.EHOSTUNREACH, errno.ENETUNREACH):
            return False
        raise OpError("os", f"clock_probe: send: {e.strerror}", errno=e.errno) from None
    return True


def _exchange(sock: socket.socket, seq: int, wait_s: float) -> list[int] | None:
    """One probe and its answer's four stamps, or None (no answer within ``wait_s``)."""
    t1 = now_us()
    if not _send(sock, _PROBE.pack(_MAGIC, _KIND_PROBE, seq, t1)):
        time.sleep(wait_s / 5)  # the echo is not bound yet: do not spin
        return None
    end = time.monotonic() + wait_s
    while True:
        try:
            got = _recv_spin(sock, end)
        except OSError as e:
            if e.errno == errno.ECONNREFUSED:
                return None  # an earlier probe's port unreachable: the echo was not up
            raise OpError("os", f"clock_probe: recv: {e.strerror}", errno=e.errno) from None
        t4 = now_us()
        if got is None:
            return None
        data = got[0]
        if len(data) != _ANSWER.size:
            continue
        magic, kind, got_seq, got_t1, t2, t3 = _ANSWER.unpack(data)
        if magic == _MAGIC and kind == _KIND_ANSWER and got_seq == seq and got_t1 == t1:
            return [t1, t2, t3, t4]
        # A late answer to an earlier probe: its window is as valid, but its t4 is not
        # ours to know; drop it and keep waiting for this one.


METHODS: dict[MethodName, Callable[..., object]] = {
    "clock_echo": clock_echo,
    "clock_probe": clock_probe,
}
