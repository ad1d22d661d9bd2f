"""Segments corrupted on the path: in the capture, never in the receiver's TCP.

A bit flipped on the path (netem corrupt, docs/impairment.md) leaves a segment
whose TCP checksum fails; the receiver's TCP discards it (RFC 9293 3.1) and the
sender sends the bytes again.  A capture point before the flip's receiver keeps
the broken copy, and tshark reads it like any other: an ACK flipped into an RST,
or an MPA request whose ORD says 129.  Worse, tshark's MPA state takes that
frame, and it does not dissect the retransmission's payload
(``tcp.no_subdissector_on_error``), so the only decoded copy is the broken one
(a CI run judged ORD 129 against the ORD 1 siw sent).

So when a capture holds such segments, it is read again without them: tshark
writes a copy of the file without those frames, and that copy is decoded, its
frame numbers put back to the file's.  The retransmission is then the copy
tshark decodes.  One that fills a gap behind later segments is still not
dissected (tshark marks it a retransmission), so that FPDU is missing from the
exchange rather than read wrong.

A bad checksum is taken for corruption only where most of its sender's
checked segments at that capture point are good.  A sender whose sums are
mostly bad is checksum offload at its own capture point: the NIC fills the sum
in after the tap, and the few good ones are segments the kernel summed itself,
such as an RST (tests/data/wire/pull-carrier-retransmits.pcap, on loopback: 1
good, 5 bad, the rest unverifiable).  A corrupting path flips a share of
segments (20 % in the impairment suite), so its sender stays mostly good.
"""

from __future__ import annotations

import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from hil.wire import realign, tshark

# tshark's tcp.checksum.status (-o tcp.check_checksum:TRUE): 0 bad, 1 good, 2 unverified.
_BAD, _GOOD = "0", "1"


@dataclass(frozen=True)
class Reading:
    """One capture file as decoded, without its segments corrupted on the path."""

    read: tshark.Read
    realigned: int = 0  # segments hil.wire.realign decoded one by one
    left_out_empty: int = 0
    left_out_data: int = 0


def read(path: Path, *, timeout: float) -> Reading:
    """Capture ``path`` decoded (:func:`hil.wire.realign.read`), segments corrupted on the
    path left out; frame numbers are those of ``path``."""
    first = realign.read(path, timeout=timeout)
    bad = corrupted(first.read.packets)
    if not bad:
        return Reading(first.read, first.segments)
    frames = sorted(int(f["frame.number"][0]) for f in bad)
    data = sum(1 for f in bad if f.get("tcp.len", ["0"])[0] != "0")
    with tempfile.TemporaryDirectory(prefix="hil-wire-") as tmp:
        kept = Path(tmp) / f"{path.stem}-intact.pcapng"
        tshark.write_without(path, frames, kept, timeout=timeout)
        again = realign.read(kept, timeout=timeout)
    packets = [renumbered(f, frames) for f in again.read.packets]
    return Reading(
        tshark.Read(packets, first.read.warning),
        again.segments,
        left_out_empty=len(bad) - data,
        left_out_data=data,
    )


def corrupted(packets: list[tshark.Fields]) -> list[tshark.Fields]:
    """The segments of ``packets`` whose TCP checksum is bad while most of their sender's
    checked segments at this capture point are good.  A segment whose TCP header tshark
    could not read (no ``tcp.len``) is not among them: :mod:`hil.wire.decode` leaves it
    out itself."""
    checked = Counter((_sender(f), _status(f)) for f in packets if _sender(f))
    trusted = {s for (s, status), n in checked.items() if status == _GOOD and n > checked[s, _BAD]}
    return [f for f in packets if _status(f) == _BAD and "tcp.len" in f and _sender(f) in trusted]


def renumbered(f: tshark.Fields, removed: list[int]) -> tshark.Fields:
    """``f`` with its frame number in the file that still held the ``removed`` frames."""
    number = int(f["frame.number"][0])
    for gone in removed:  # ascending: each one at or before it shifts it by one
        if gone <= number:
            number += 1
    return {**f, "frame.number": [str(number)]}


def _status(f: tshark.Fields) -> str:
    return f.get("tcp.checksum.status", ["2"])[0]


def _sender(f: tshark.Fields) -> tuple[str, str] | None:
    ip = "ipv6" if "ipv6.src" in f else "ip"
    if f"{ip}.src" not in f or "tcp.srcport" not in f:
        return None
    return f[f"{ip}.src"][-1], f["tcp.srcport"][0]
