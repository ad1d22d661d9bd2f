"""FPDUs that tshark's TCP reassembly lost after a frame cut by the snap length.

A capture keeps 512 bytes of each frame (:data:`hil.wire.capture.SNAPLEN`).
When an FPDU runs past its segment (siw sends an FPDU's last bytes, or its
CRC alone, in a segment of their own), tshark's MPA dissector asks TCP to
reassemble it from bytes the capture never kept.  The reassembly cannot
complete, and from then on tshark takes every later segment of that
direction for a piece of it ("TCP segment of a reassembled PDU"), though
each starts an aligned FPDU: a TERMINATE sent after it is never decoded
(docs/interop.md has the capture where this was found).

With reassembly off tshark decodes each segment on its own and still steps
over an FPDU's continuation, from the lengths it has read.  So when the
first reading leaves data segments of an MPA connection undecoded, a second
one without reassembly is taken for the segments it decodes exactly: the
FPDUs it found fill the segment to its last byte (RFC 5044 4.1: 2 bytes of
ULPDU_Length, the ULPDU, a pad to 4 bytes, 4 bytes of CRC; no Markers), and
the first reading's FPDUs did not.  A segment taken at the wrong offset
would have to hold FPDU lengths that add up to its own length by chance.
The first reading stays for everything else: it alone decodes an MPA
request or reply written in pieces (``request-one-byte-segments``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from hil.wire import tshark

_MPA_FRAME = ("iwarp_mpa.req", "iwarp_mpa.rep")
_CRC = 4
_LENGTH_FIELD = 2


@dataclass(frozen=True)
class Realigned:
    """tshark's reading of one file, and how many segments the second reading gave."""

    read: tshark.Read
    segments: int = 0


def read(path: Path, *, timeout: float) -> Realigned:
    """Capture ``path`` decoded by tshark, lost FPDUs recovered (see the module doc)."""
    first = tshark.read(path, timeout=timeout)
    streams = _mpa_streams(first.packets)
    if not any(_lost(f, streams) for f in first.packets):
        return Realigned(first)
    second = {_frame(f): f for f in tshark.read(path, timeout=timeout, desegment=False).packets}
    packets, segments = [], 0
    for f in first.packets:
        other = second.get(_frame(f))
        if other is not None and fits(other) and not fits(f):
            f, segments = other, segments + 1
        packets.append(f)
    return Realigned(tshark.Read(packets, first.warning), segments)


def _mpa_streams(packets: list[tshark.Fields]) -> set[str]:
    return {f["tcp.stream"][0] for f in packets if "tcp.stream" in f and _has_mpa(f)}


def _has_mpa(f: tshark.Fields) -> bool:
    return any(k.startswith("iwarp_mpa.") for k in f)


def _lost(f: tshark.Fields, streams: set[str]) -> bool:
    """A data segment of an MPA connection that tshark neither decoded nor reassembled."""
    return (
        f.get("tcp.stream", [""])[0] in streams
        and f.get("tcp.len", ["0"])[0] != "0"
        and not _has_mpa(f)
        and "tcp.reassembled_in" not in f
    )


def fits(f: tshark.Fields) -> bool:
    """Whether the FPDUs tshark read in ``f`` fill its TCP payload exactly."""
    lengths = f.get("iwarp_mpa.ulpdulength", [])
    if not lengths or any(k in f for k in _MPA_FRAME) or "tcp.len" not in f:
        return False
    return sum(fpdu_size(tshark.number(n)) for n in lengths) == int(f["tcp.len"][0])


def fpdu_size(ulpdu_length: int) -> int:
    """Bytes on the wire of an FPDU carrying ``ulpdu_length`` bytes, no Markers (RFC 5044 4.1)."""
    unpadded = _LENGTH_FIELD + ulpdu_length
    return unpadded + (-unpadded) % 4 + _CRC


def _frame(f: tshark.Fields) -> str:
    return f["frame.number"][0]
