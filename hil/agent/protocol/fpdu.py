"""MPA framing of an FPDU (RFC 5044 4): ``ULPDU_Length (16) | ULPDU | pad | CRC``.

The pad fills the FPDU to a multiple of 4 bytes (RFC 5044 4.1: "PAD ... 0 to 3
octets ... to make the FPDU ... a multiple of four"); the CRC32c covers everything
before it (RFC 5044 4.1, 6) when CRC was negotiated (RFC 5044 7.1).  The CRC field
is in every FPDU (RFC 5044 4.1's format): without CRC negotiated it is sent as 0 and
not checked, as siw sends and reads it (Linux 6.1.192 siw_qp_tx.c:261-265 always adds
MPA_CRC_SIZE; siw_qp_rx.c:971-990 siw_get_trailer always reads the trailer and checks
it only with CRC on).  Without the field siw waits for 4 more bytes: the lab showed a
SEND never delivered (peer scenarios neg-rev1, neg-rev2-no-crc, 2026-12-05).

Markers (RFC 5044 5) are never sent: the peer does not ask for them and refuses a
request that does (``mpa.reply_defaults``), so an FPDU is read without them.

Fields: ulpdu_length, pad, crc (the CRC value, see ``crc32c``); names added here:
``crc_ok`` (bool: the CRC received is the one computed).  Encoding overrides:
``ulpdu_length`` and ``pad`` (the 16-bit value and the count of pad bytes sent; the
bytes sent stay the frame's), ``crc``: "good" (default), "bad" (its bits inverted),
"none" (left out) or an integer.
"""

from __future__ import annotations

import struct

from . import rdmap
from .crc32c import crc32c, from_wire, wire_bytes
from .frames import Fields, FrameError, int_field, short

LENGTH = 2
CRC = 4


def pad_of(ulpdu_length: int) -> int:
    """The pad an FPDU of this ULPDU_Length has (RFC 5044 4.1)."""
    return -(LENGTH + ulpdu_length) % 4


def size(ulpdu_length: int) -> int:
    """The bytes of a whole FPDU whose first two say ``ulpdu_length``."""
    return LENGTH + ulpdu_length + pad_of(ulpdu_length) + CRC


def encode(fields: Fields, crc_on: bool, msn: int) -> bytes:
    """The FPDU of ``fields`` (an RDMAP message's, and the framing's overrides)."""
    if fields.get("markers"):
        raise FrameError("markers: the peer never inserts markers (RFC 5044 5); it refuses them")
    ulpdu = rdmap.encode(fields, msn)
    length = int_field(fields, "ulpdu_length", len(ulpdu), 16)
    pad = int_field(fields, "pad", pad_of(len(ulpdu)), 16)
    body = struct.pack("!H", length) + ulpdu + bytes(pad)
    return body + _crc(fields.get("crc", "good"), body, crc_on)


def _crc(want: object, body: bytes, crc_on: bool) -> bytes:
    if want == "none":
        return b""
    if not crc_on and want == "good":
        return bytes(CRC)
    if want == "good":
        return wire_bytes(crc32c(body))
    if want == "bad":
        return wire_bytes(crc32c(body) ^ 0xFFFFFFFF)
    return wire_bytes(int_field({"crc": want}, "crc", 0, 32))


def decode(data: bytes, crc_on: bool) -> Fields:
    """The fields of the FPDU ``data`` (framing and message); ``error`` says what is
    wrong with it (a short frame, a bad CRC, the message's own errors)."""
    if len(data) < LENGTH:
        return {"error": short("FPDU", LENGTH, len(data))}
    (length,) = struct.unpack_from("!H", data)
    ulpdu = data[LENGTH : LENGTH + length]
    got = rdmap.decode(ulpdu)
    errors = [got.pop("error")] if "error" in got else []
    got.update(ulpdu_length=length, pad=pad_of(length))
    end = LENGTH + length + pad_of(length)
    if len(data) < end + CRC:
        errors.append(short("FPDU", end + CRC, len(data)))
    else:
        got["crc"] = from_wire(data[end : end + CRC])
    if "crc" in got and crc_on:
        got["crc_ok"] = got["crc"] == crc32c(data[:end])
        if not got["crc_ok"]:
            errors.append("CRC does not match the FPDU (RFC 5044 6)")
    if errors:
        got["error"] = "; ".join(errors)
    return got
