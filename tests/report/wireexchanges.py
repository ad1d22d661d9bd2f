"""Hand-built exchanges for the wire lane and the report hook (the decoder is the boundary).

``closed()`` is what both ends of cmtimelines' ``orderly_close()`` would
capture: host A (lab-a, 198.18.0.1) connects to B's listener (198.18.0.2,
port 7174), then each side sends a FIN.  Each packet is seen by both
capture points, 0.1 ms apart (sent, then received), on the timeline's base.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from hil.judge.timeline import Timeline
from hil.wire.model import Connection, Endpoint, Exchange, Mpa, Packet, Terminate

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "judge"))
import cmtimelines  # noqa: E402  (the contract tests' hand-built timelines)

A: Endpoint = ("198.18.0.1", 40000)
B: Endpoint = ("198.18.0.2", 7174)
HOST = {A[0]: "lab-a", B[0]: "lab-b"}
TRANSIT_MS = 0.1


def mpa(kind: str, reject: bool = False) -> Mpa:
    return Mpa(kind, 2, False, False, reject, True, "", "00010001", 1, 1)  # type: ignore[arg-type]


def seen(
    n: int,
    src: Endpoint,
    dst: Endpoint,
    flags: str,
    t_ms: float,
    seq: int = 0,
    placed: bool = True,
    **kw: object,
) -> list[Packet]:
    """One segment as the sender's point and the receiver's saw it (``t_us`` None: unplaced)."""
    out = []
    for i, point in enumerate((HOST[src[0]], HOST[dst[0]])):
        t_us = int((t_ms + i * TRANSIT_MS) * 1000)
        out.append(
            Packet(
                frame=n,
                point=point,
                wall_us=t_us,
                src=src,
                dst=dst,
                flags=frozenset(flags.split(",")),
                seq=seq,
                t_us=t_us if placed else None,
                **kw,  # type: ignore[arg-type]
            )
        )
    return out


def closed_packets(
    placed: bool = True, a: Endpoint = A, b: Endpoint = B, t0: float = 0.0
) -> list[Packet]:
    """``a`` connects to ``b``: handshake at 1..4.5 ms, FINs at 100.5 and 101 ms (``t0`` later)."""

    def at(ms: float) -> dict[str, Any]:
        return {"t_ms": t0 + ms, "placed": placed}

    return [
        *seen(1, a, b, "SYN", **at(1.2)),
        *seen(2, b, a, "SYN,ACK", **at(1.5)),
        *seen(3, a, b, "ACK", **at(1.7), seq=1),
        *seen(4, a, b, "ACK,PSH", **at(1.8), seq=1, length=24, mpa=mpa("request")),
        *seen(5, b, a, "ACK,PSH", **at(4.3), seq=1, length=24, mpa=mpa("reply")),
        *seen(6, a, b, "ACK,PSH", **at(50), seq=25, length=64, rdmap=("Send",)),
        *seen(7, a, b, "FIN,ACK", **at(100.5), seq=89),
        *seen(8, b, a, "FIN,ACK", **at(101), seq=25),
        *seen(9, a, b, "ACK", **at(101.3), seq=90),
    ]


def exchange(packets: list[Packet], placed: bool = True) -> Exchange:
    """One connection A > B seen at both points."""
    conn = Connection(active=packets[0].src, passive=packets[0].dst, packets=tuple(packets))
    unc = {"lab-a": 120, "lab-b": 250} if placed else {}
    return Exchange((conn,), ("lab-a", "lab-b"), unc)


def closed(placed: bool = True) -> Exchange:
    return exchange(closed_packets(placed), placed)


def with_target(tl: Timeline) -> Timeline:
    """``tl`` with each connect naming the target B (``dst``, ``port``), as sequences do."""
    actions = tuple(
        replace(a, params={**a.params, "dst": B[0], "port": B[1]}) if a.name == "connect" else a
        for a in tl.actions
    )
    return replace(tl, actions=actions)


def timeline() -> Timeline:
    """cmtimelines' orderly close, its connect naming the target B."""
    return with_target(cmtimelines.orderly_close())


def aborted() -> Exchange:
    """The handshake, then a TERMINATE and an RST from A, and a retransmitted Send."""
    pkts = closed_packets()[:10]
    term = Terminate("DDP", 1, 2, "invalid STag")
    pkts += seen(6, A, B, "ACK,PSH", 50, seq=25, length=64, rdmap=("Send",))
    pkts += [
        replace(p, retransmission=True)
        for p in seen(7, A, B, "ACK,PSH", 60, seq=25, length=64, rdmap=("Send",))
    ]
    pkts += seen(8, A, B, "ACK,PSH", 100.5, seq=89, length=28, terminate=term, rdmap=("Terminate",))
    pkts += seen(9, A, B, "RST,ACK", 100.8, seq=117)
    return exchange(pkts)
