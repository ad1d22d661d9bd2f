"""Complete packet records in a slice of a growing pcap file.

A capture that runs for a whole pair session (:meth:`hil.wire.capture.Capture.cut`)
is cut into one file per test: the file's global header, then the records
written since the last cut.  tcpdump may be writing a record while the file is
read, so only complete records are taken; the rest waits for the next cut.

The format is libpcap's (pcap-savefile(5)): a 24-byte global header whose
magic number gives the byte order (``0xa1b2c3d4``, or ``0xa1b23c4d`` with
nanosecond time stamps), then per packet a 16-byte record header (seconds,
fraction, captured length, original length) and the captured bytes.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from hil.errors import InputError

HEADER = 24  # pcap-savefile(5): the file header
RECORD = 16  # pcap-savefile(5): each packet's header
_MAGIC = {
    b"\xd4\xc3\xb2\xa1": "<",
    b"\xa1\xb2\xc3\xd4": ">",
    b"\x4d\x3c\xb2\xa1": "<",
    b"\xa1\xb2\x3c\x4d": ">",
}


def byte_order(header: bytes) -> str:
    """The struct byte order of a pcap file from its header; InputError when it is no pcap."""
    order = _MAGIC.get(header[:4]) if len(header) >= HEADER else None
    if order is None:
        raise InputError(f"not a pcap file header: {header[:4].hex() or 'empty'}")
    return order


@dataclass(frozen=True)
class Records:
    """What a slice of records holds."""

    complete: int  # bytes of its complete records, from the slice's start
    kept: int  # bytes of its first ``limit`` records
    packets: int  # its complete records


def records(data: bytes, order: str, limit: int) -> Records:
    """The complete records at the start of ``data`` (which starts at a record), and
    where the first ``limit`` of them end."""
    at = kept = packets = 0
    length = struct.Struct(f"{order}8xI4x")  # the captured length of a record header
    while at + RECORD <= len(data):
        (caplen,) = length.unpack_from(data, at)
        end = at + RECORD + caplen
        if end > len(data):
            break
        at, packets = end, packets + 1
        if packets <= limit:
            kept = at
    return Records(at, kept, packets)
