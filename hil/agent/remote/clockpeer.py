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
were answered or ``budget_s`` passed since the first answer, and returns
every answered probe's four stamps.  The two run as two agent calls at once; a probe sent before the
echo is bound is refused or lost and sent again, within the call's timeout.

Send stamps (t1, t3) are read in user space right before ``send``; receive
stamps (t2, t4) are the kernel's (``SO_TIMESTAMPNS``: when the stack took the
datagram, before the process woke to read it), moved from CLOCK_REALTIME onto
CLOCK_MONOTONIC by the two clocks' difference, else the time of reading.
Either way a delay only widens a sample's window, never shifts it past the
truth, so the bounds above hold whatever the load; the kernel's stamps leave
the receiving process's wake-up out (on a loaded TCG guest, most of the
round trip).  A clock step between two receives (the difference of the two
clocks moved) falls back to the time of reading for that datagram.
"""

from __future__ import annotations

import errno
import socket
import struct
import time
from collections.abc import Callable
from typing import Any

from ..protocol import ClockEchoReply, ClockProbeReply, MethodName
from .errors import OpError
from .hostclock import now_us

PROBE_WAIT_S = 0.05  # one probe's answer: the link's round trip is well under 1 ms
MAX_COUNT = 2000
# A probe: magic, kind, sequence number, t1.  An answer: the probe's fields, t2, t3.
_PROBE = struct.Struct("!4sBIq")
_ANSWER = struct.Struct("!4sBIqqq")
_MAGIC = b"hilC"
_KIND_PROBE, _KIND_STOP, _KIND_ANSWER = 1, 2, 3
_STOPS = 3  # stop datagrams sent at the end (UDP: one may be lost)
_SO_TIMESTAMPNS = 35  # asm-generic (x86, arm); Python's socket module does not export it
_TIMESPEC = struct.Struct("@qq")
_STEP_NS = 2000  # the clocks' difference moved more than this: a step, not read jitter


def _socket(address: str, port: int, what: str) -> socket.socket:
    try:
        family, _, _, _, sockaddr = socket.getaddrinfo(
            address, port, type=socket.SOCK_DGRAM, flags=socket.AI_NUMERICHOST
        )[0]
    except socket.gaierror as e:
        raise OpError("bad_params", f"{what}: {address!r} is not an IP address: {e}") from None
    sock = socket.socket(family, socket.SOCK_DGRAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, _SO_TIMESTAMPNS, 1)
    except OSError:
        pass  # no kernel stamps: the time of reading bounds as well, less tightly
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
        arrival = _Arrival()
        while True:
            got = arrival.recv(sock, deadline)
            if got is None:
                break
            data, peer, t2 = got
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


def clock_probe(
    src: str, dst: str, port: int, count: int, budget_s: float, timeout: float
) -> ClockProbeReply:
    """Send probes from ``src`` to the echo at ``dst:port`` until ``count`` were answered
    or ``budget_s`` passed since the first answer (waiting for that one up to ``timeout``:
    the echo may start later); every answered probe's stamps ``[t1, t2, t3, t4]`` (t2, t3
    on the echo's clock)."""
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
        arrival = _Arrival()
        while len(samples) < count and time.monotonic() < deadline:
            sent += 1
            wait_s = min(PROBE_WAIT_S, max(0.0, deadline - time.monotonic()))
            got = _exchange(sock, arrival, sent, wait_s)
            if got is not None:
                if not samples:
                    deadline = min(deadline, time.monotonic() + budget_s)
                samples.append(got)
        for _ in range(_STOPS):
            _send(sock, _PROBE.pack(_MAGIC, _KIND_STOP, 0, 0))
    return {"samples": samples, "sent": sent}


class _Arrival:
    """Reads datagrams with their arrival time on this host's CLOCK_MONOTONIC (µs)."""

    def __init__(self) -> None:
        self.shift_ns = _mono_minus_wall()

    def recv(self, sock: socket.socket, deadline: float) -> tuple[bytes, Any, int] | None:
        """The next datagram, its sender and arrival, or None at ``deadline`` (monotonic s)."""
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        sock.settimeout(left)
        try:
            data, ancillary, _, peer = sock.recvmsg(64, socket.CMSG_SPACE(_TIMESPEC.size))
        except socket.timeout:  # noqa: UP041 -- not TimeoutError before python 3.10
            return None
        read_us = now_us()
        shift = _mono_minus_wall()
        stepped, self.shift_ns = abs(shift - self.shift_ns) > _STEP_NS, shift
        for level, kind, raw in ancillary:
            if level == socket.SOL_SOCKET and kind == _SO_TIMESTAMPNS and not stepped:
                sec, nsec = _TIMESPEC.unpack(raw[: _TIMESPEC.size])
                return data, peer, min(read_us, (sec * 10**9 + nsec + shift) // 1000)
        return data, peer, read_us


def _mono_minus_wall() -> int:
    """CLOCK_MONOTONIC - CLOCK_REALTIME (ns), from the tightest of three paired reads,
    taken at its late end: a kernel stamp moved by it is never earlier than the truth."""
    best = None
    for _ in range(3):
        before = time.monotonic_ns()
        wall = time.time_ns()
        after = time.monotonic_ns()
        if best is None or after - before < best[0]:
            best = (after - before, after - wall)
    assert best is not None
    return best[1]


def _send(sock: socket.socket, data: bytes) -> bool:
    """Send one datagram; False when the echo is not there (yet): ICMP port unreachable."""
    try:
        sock.send(data)
    except OSError as e:
        if e.errno in (errno.ECONNREFUSED, errno.EHOSTUNREACH, errno.ENETUNREACH):
            return False
        raise OpError("os", f"clock_probe: send: {e.strerror}", errno=e.errno) from None
    return True


def _exchange(sock: socket.socket, arrival: _Arrival, seq: int, wait_s: float) -> list[int] | None:
    """One probe and its answer's four stamps, or None (no answer within ``wait_s``)."""
    t1 = now_us()
    if not _send(sock, _PROBE.pack(_MAGIC, _KIND_PROBE, seq, t1)):
        time.sleep(wait_s / 5)  # the echo is not bound yet: do not spin
        return None
    end = time.monotonic() + wait_s
    while True:
        try:
            got = arrival.recv(sock, end)
        except OSError as e:
            if e.errno == errno.ECONNREFUSED:
                return None  # an earlier probe's port unreachable: the echo was not up
            raise OpError("os", f"clock_probe: recv: {e.strerror}", errno=e.errno) from None
        if got is None:
            return None
        data, _, t4 = got
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
