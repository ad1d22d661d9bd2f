"""Closing an rdma_cm event channel (the ucma file) right after rdma_resolve_route.

The agent method ``cm_close_race`` runs the rounds in a child process (this
module's :func:`main`, started from the same zipapp), because a channel
closed under librdmacm's feet leaves that process's librdmacm state behind:
the child exits and the kernel's ucma_close destroys what was left.  Each
round opens a channel, resolves the address (waiting for ADDR_RESOLVED),
calls rdma_resolve_route, waits ``delay_us``, notes whether the route's event
had already reached the file (a poll of its fd), and closes the fd.
"""

from __future__ import annotations

import json
import os
import select
import sys
from collections.abc import Callable
from typing import Any

from ...protocol import CloseRaceReply, CloseRound, MethodName
from ..errors import OpError
from ..hostclock import now_us
from ..librdmacm import RESOLVE_MS, CMChannel, RdmaError
from ..system import run

_BOOT = (
    "import sys; sys.path.insert(0, sys.argv[1]); "
    "from hil_agent.remote.cm.close import main; main()"
)
ADDR_WAIT_S = 5.0


def cm_close_race(
    dst: str, port: int, src: str, delays_us: list[int], timeout: float
) -> CloseRaceReply:
    """One round per delay (µs after rdma_resolve_route returned) in a child process."""
    if not delays_us or len(delays_us) > 200 or any(d < 0 or d > 1_000_000 for d in delays_us):
        raise OpError("bad_params", "delays_us: 1..200 delays of 0..1000000 µs, please")
    spec = json.dumps({"dst": dst, "port": port, "src": src, "delays_us": delays_us})
    argv = [sys.executable, "-IS", "-c", _BOOT, os.path.abspath(sys.argv[0]), spec]
    got = run(argv, timeout)
    if got["status"] != 0:
        raise OpError(
            "rdma_unavailable" if "librdmacm" in got["stderr"] else "internal",
            f"cm_close_race child exited {got['status']}: {got['stderr'][-400:]}",
        )
    reply: CloseRaceReply = json.loads(got["stdout"])
    return reply


def _round(dst: str, port: int, src: str, delay_us: int) -> CloseRound:
    ch = CMChannel()
    h = ch.create_id()
    ch.resolve_addr(h, dst, port, src, RESOLVE_MS)
    ev = ch.poll_event(ADDR_WAIT_S)
    if ev is None or ev["type"] != "ADDR_RESOLVED":
        raise RdmaError("rdma_resolve_addr", 113, f"got {ev['type'] if ev else 'nothing'}")
    fd, ready = ch.fd, select.poll()
    ready.register(fd, select.POLLIN)
    t0 = now_us()
    ch.resolve_route(h, RESOLVE_MS)
    t1 = now_us()
    # Nothing but the close between the return and the close: under TCG each Python
    # step costs ~10 µs, and a close "right after" must come within 100 µs.
    if delay_us:
        while now_us() < t1 + delay_us:
            pass  # spin: a sleep would overshoot by a scheduler tick
    queued = bool(ready.poll(0))
    closed = now_us()
    os.close(fd)  # the ucma file goes with the id and its route work in it
    return {
        "route_us": t1 - t0,
        "close_after_us": closed - t1,
        "queued": queued,
        "t_us": closed,
    }


def main() -> None:
    """The child: rounds from argv's JSON, the reply as JSON on stdout."""
    spec: dict[str, Any] = json.loads(sys.argv[2])
    rounds = [_round(spec["dst"], spec["port"], spec["src"], d) for d in spec["delays_us"]]
    sys.stdout.write(json.dumps({"rounds": rounds}))


METHODS: dict[MethodName, Callable[..., object]] = {"cm_close_race": cm_close_race}
