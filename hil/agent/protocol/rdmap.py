"""RDMAP messages (RFC 5040 4) inside DDP segments: a ULPDU encoded from its fields and
decoded back.

Opcodes (RFC 5040 4.3), by name: 0 write, 1 read_request, 2 read_response, 3 send,
4 send_inv, 5 send_se, 6 send_se_inv, 7 terminate.  WRITE and READ response go in
tagged segments, the others untagged (RFC 5040 4.3's table), on the queue numbers of
RFC 5040 5.1: 0 for the Sends, 1 for READ requests, 2 for TERMINATE.

- READ request (RFC 5040 4.4), after its untagged header: Data Sink STag (32), Data
  Sink Tagged Offset (64), RDMA Read Message Size (32), Data Source STag (32), Data
  Source Tagged Offset (64): fields sink_stag, sink_to, size, source_stag, source_to.
- TERMINATE (RFC 5040 4.8), after its untagged header: Layer (4), EType (4), Error
  Code (8), Hdrct (M, D, R), Rsvd (13); with M or D, the DDP Segment Length (16) and
  the terminated DDP header; with R, the terminated RDMAP header.  Fields layer,
  etype, ecode, hdrct_m, hdrct_d, hdrct_r, ddp_seg_len; names added here:
  ``ddp_header`` and ``rdma_header`` (the copied headers, hex) and ``term_rsvd``.
- Any data: ``payload`` (hex).

Decoding never raises; ``error`` names what breaks the RFC (an unknown opcode, a
tagged/untagged mismatch, a version other than 1, a short header).
"""

from __future__ import annotations

import struct

from . import ddp
from .frames import Fields, FrameError, hex_field, int_field, short
from .peer import PEER_OPCODES

OPCODES = PEER_OPCODES  # RFC 5040 4.3, the index is the opcode
TAGGED_OPS = ("write", "read_response")  # RFC 5040 4.3
SEND_QN, READ_QN, TERMINATE_QN = 0, 1, 2  # RFC 5040 5.1
READ_REQUEST = struct.Struct("!IQIIQ")  # RFC 5040 4.4: 28 bytes
TERM_CONTROL = 4  # RFC 5040 4.8


def queue(opcode: str) -> int:
    """The untagged queue number a message of ``opcode`` goes on (RFC 5040 5.1)."""
    if opcode == "read_request":
        return READ_QN
    return TERMINATE_QN if opcode == "terminate" else SEND_QN


def opcode_number(fields: Fields) -> tuple[str, int]:
    """The name and number of ``fields["opcode"]`` (a name, or any 4-bit number)."""
    op = fields.get("opcode", "send")
    if isinstance(op, str):
        if op not in OPCODES:
            raise FrameError(f"opcode: {op!r} is not one of {', '.join(OPCODES)}")
        return op, OPCODES.index(op)
    number = int_field(fields, "opcode", 0, 4)
    return (OPCODES[number] if number < len(OPCODES) else str(number)), number


def encode(fields: Fields, msn: int) -> bytes:
    """The ULPDU (DDP header, RDMAP header, payload) of ``fields``; ``msn`` is the MSN
    an untagged message gets unless ``fields`` say otherwise."""
    name, number = opcode_number(fields)
    fields = {"qn": queue(name), **fields}
    head = ddp.encode(fields, number, name in TAGGED_OPS, msn)
    return head + _body(name, fields) + hex_field(fields, "payload", b"")


def _body(name: str, fields: Fields) -> bytes:
    if name == "read_request":
        return READ_REQUEST.pack(
            int_field(fields, "sink_stag", 0, 32),
            int_field(fields, "sink_to", 0, 64),
            int_field(fields, "size", 0, 32),
            int_field(fields, "source_stag", 0, 32),
            int_field(fields, "source_to", 0, 64),
        )
    if name == "terminate":
        return _terminate(fields)
    return b""


def _terminate(fields: Fields) -> bytes:
    m, d, r = (int_field(fields, f"hdrct_{x}", 0, 1) for x in "mdr")
    control = (
        int_field(fields, "layer", 0, 4) << 28
        | int_field(fields, "etype", 0, 4) << 24
        | int_field(fields, "ecode", 0, 8) << 16
        | (m << 15 | d << 14 | r << 13)
        | int_field(fields, "term_rsvd", 0, 13)
    )
    body = struct.pack("!I", control)
    if m or d:
        ddp_header = hex_field(fields, "ddp_header", b"")
        body += struct.pack("!H", int_field(fields, "ddp_seg_len", 0, 16)) + ddp_header
    if r:
        body += hex_field(fields, "rdma_header", b"")
    return body


def decode(ulpdu: bytes) -> Fields:
    """The fields of a ULPDU; ``error`` says what is wrong with it."""
    got, size = ddp.decode(ulpdu)
    if not size:
        return got
    number = got["opcode"]
    got["opcode"] = OPCODES[number] if number < len(OPCODES) else number
    errors = _header_errors(got)
    rest = ulpdu[size:]
    if got["opcode"] == "read_request":
        rest = _read_request(got, rest, errors)
    elif got["opcode"] == "terminate":
        rest = _decode_terminate(got, rest, errors)
    got["payload"] = rest.hex()
    if errors:
        got["error"] = "; ".join(errors)
    return got


def _header_errors(got: Fields) -> list[str]:
    errors = []
    op = got["opcode"]
    if isinstance(op, int):
        errors.append(f"opcode {op} is none of RFC 5040 4.3's (0..7)")
    elif (op in TAGGED_OPS) != bool(got["t"]):
        model = "tagged" if got["t"] else "untagged"
        errors.append(f"{op} in an {model} DDP segment (RFC 5040 4.3)")
    if got["dv"] != ddp.DDP_VERSION:
        errors.append(f"DDP version {got['dv']}, not 1 (RFC 5041 4.2)")
    if got["rv"] != ddp.RDMAP_VERSION:
        errors.append(f"RDMAP version {got['rv']}, not 1 (RFC 5040 4.2)")
    return errors


def _read_request(got: Fields, rest: bytes, errors: list[str]) -> bytes:
    if len(rest) < READ_REQUEST.size:
        errors.append(short("READ request header (RFC 5040 4.4)", READ_REQUEST.size, len(rest)))
        return rest
    names = ("sink_stag", "sink_to", "size", "source_stag", "source_to")
    got.update(zip(names, READ_REQUEST.unpack_from(rest)))  # noqa: B905 -- python 3.9: no strict
    return rest[READ_REQUEST.size :]


def _decode_terminate(got: Fields, rest: bytes, errors: list[str]) -> bytes:
    if len(rest) < TERM_CONTROL:
        errors.append(short("TERMINATE header (RFC 5040 4.8)", TERM_CONTROL, len(rest)))
        return rest
    (control,) = struct.unpack_from("!I", rest)
    got.update(
        layer=control >> 28,
        etype=control >> 24 & 0xF,
        ecode=control >> 16 & 0xFF,
        hdrct_m=control >> 15 & 1,
        hdrct_d=control >> 14 & 1,
        hdrct_r=control >> 13 & 1,
        term_rsvd=control & 0x1FFF,
    )
    rest = rest[TERM_CONTROL:]
    if got["hdrct_m"] or got["hdrct_d"]:
        if len(rest) < 2 + ddp.CONTROL:
            errors.append(short("TERMINATE's terminated DDP header", 2 + ddp.CONTROL, len(rest)))
            return rest
        (got["ddp_seg_len"],) = struct.unpack_from("!H", rest)
        size = ddp.header_length(rest[2:])
        got["ddp_header"] = rest[2 : 2 + size].hex()
        rest = rest[2 + size :]
    if got["hdrct_r"]:
        got["rdma_header"], rest = rest.hex(), b""
    return rest
