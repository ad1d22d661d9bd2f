"""DDP segment headers (RFC 5041 4): the 16-bit control field and the tagged or untagged
buffer model's fields.

Control (RFC 5041 4.2, 4.3): ``|T|L| Rsvd (4) | DV (2) | RsvdULP (8) |``; the RsvdULP
byte is RDMAP's control field (RFC 5040 4.2): ``| RV (2) | Rsvd (2) | Opcode (4) |``.
Tagged (RFC 5041 4.2): STag (32), TO (64): 14 bytes in all.  Untagged (RFC 5041 4.3):
RsvdULP (32), QN (32), MSN (32), MO (32): 18 bytes.

Fields: t, l, dv, rsvd (DDP); rv, opcode (RDMAP, see ``rdmap``); stag, to (tagged);
qn, msn, mo (untagged).  Names added here: ``rdmap_rsvd`` (RDMAP's 2 reserved control
bits) and ``rsvdulp`` (the untagged header's 32-bit RsvdULP: the STag to invalidate of a
Send with Invalidate, RFC 5040 4.3; 0 otherwise).
"""

from __future__ import annotations

import struct

from .frames import Fields, int_field, short

CONTROL = 2
TAGGED = 14  # RFC 5041 4.2
UNTAGGED = 18  # RFC 5041 4.3
DDP_VERSION = 1  # RFC 5041 4.2: "DV ... MUST be set to one"
RDMAP_VERSION = 1  # RFC 5040 4.2: "RV ... MUST be set to one"


def header_length(control: bytes) -> int:
    """The DDP header's length, by the T bit of its first byte."""
    return TAGGED if control[0] & 0x80 else UNTAGGED


def encode(fields: Fields, opcode: int, tagged: bool, msn: int) -> bytes:
    """The DDP header (with RDMAP's control byte) of ``fields`` over the defaults: the
    buffer model ``tagged``, L=1, DV 1, RV 1, MSN ``msn``, everything else 0."""
    t = int_field(fields, "t", 1 if tagged else 0, 1)
    ddp = (
        t << 7
        | int_field(fields, "l", 1, 1) << 6
        | int_field(fields, "rsvd", 0, 4) << 2
        | int_field(fields, "dv", DDP_VERSION, 2)
    )
    rdmap = (
        int_field(fields, "rv", RDMAP_VERSION, 2) << 6
        | int_field(fields, "rdmap_rsvd", 0, 2) << 4
        | opcode
    )
    head = bytes((ddp, rdmap))
    if t:
        return head + struct.pack(
            "!IQ", int_field(fields, "stag", 0, 32), int_field(fields, "to", 0, 64)
        )
    return head + struct.pack(
        "!IIII",
        int_field(fields, "rsvdulp", 0, 32),
        int_field(fields, "qn", 0, 32),
        int_field(fields, "msn", msn, 32),
        int_field(fields, "mo", 0, 32),
    )


def decode(data: bytes) -> tuple[Fields, int]:
    """The header's fields and its length (0 when ``data`` is too short for it: the
    fields then carry ``error``); the opcode stays a number (``rdmap`` names it)."""
    if len(data) < CONTROL:
        return {"error": short("DDP header", CONTROL, len(data))}, 0
    ddp, rdmap = data[0], data[1]
    got: Fields = {
        "t": ddp >> 7,
        "l": ddp >> 6 & 1,
        "rsvd": ddp >> 2 & 0xF,
        "dv": ddp & 3,
        "rv": rdmap >> 6,
        "rdmap_rsvd": rdmap >> 4 & 3,
        "opcode": rdmap & 0xF,
    }
    size = header_length(data)
    if len(data) < size:
        got["error"] = short("DDP header", size, len(data))
        return got, 0
    if got["t"]:
        got["stag"], got["to"] = struct.unpack_from("!IQ", data, CONTROL)
    else:
        got["rsvdulp"], got["qn"], got["msn"], got["mo"] = struct.unpack_from(
            "!IIII", data, CONTROL
        )
    return got, size
