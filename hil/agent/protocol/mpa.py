"""MPA request and reply frames (RFC 5044 7.1) with the enhanced connection setup of
RFC 6581 5 (MPA revision 2: IRD/ORD, peer-to-peer mode, the ready-to-receive kinds).

A frame (RFC 5044 7.1, Figure 11)::

    Key (16 bytes: "MPA ID Req Frame" / "MPA ID Rep Frame")
    |M|C|R| Res (5) | Rev (8) | PD_Length (16) |
    Private Data (PD_Length bytes)

With revision 2 the private data begins with two 16-bit words (RFC 6581 5.1)::

    |P2P|SEND| IRD (14) |WRITE|READ| ORD (14) |

The flag bits, named as Linux names them (drivers/infiniband/sw/siw/iwarp.h
``enum mpa_v2_ctrl``, and iw_cxgb4's
``MPA_V2_PEER2PEER_MODEL`` / ``MPA_V2_ZERO_LEN_FPDU_RTR`` / ``MPA_V2_RDMA_WRITE_RTR`` /
``MPA_V2_RDMA_READ_RTR``): the IRD word's top bit asks for peer-to-peer mode, its next
bit a zero-length SEND (FPDU) as the ready-to-receive message (RTR); the ORD word's top
bit a zero-length RDMA WRITE, its next a zero-length RDMA READ (RFC 6581 5.1, 6).
Linux marks a revision-2 frame that carries the words with the first Res bit
(siw ``MPA_RR_FLAG_ENHANCED``, cxgb4 ``MPA_ENHANCED_RDMA_CONN``: 0x10 of Res);
the encoder sets it by default on revision 2.

Fields (the shared vocabulary): key (hex), m, c, r, res, rev, pd_length,
private_data (hex: the application's part, after the v2 words), ird, ord, p2p, rtr.
Names added here: ``rtrs`` (every RTR kind the flags ask for, in the order
write, read, send: a request may offer several, siw offers WRITE and READ) and
``v2`` (bool: the words are present; default: rev == 2).
"""

from __future__ import annotations

import struct

from .frames import Fields, FrameError, hex_field, int_field, short
from .peer import RTR_KINDS

REQUEST_KEY = b"MPA ID Req Frame"  # RFC 5044 7.1
REPLY_KEY = b"MPA ID Rep Frame"
KEYS = {"mpa_request": REQUEST_KEY, "mpa_reply": REPLY_KEY}
HEADER = 20  # the key and the 4 bytes of flags, Rev and PD_Length
MAX_PD = 512  # RFC 5044 7.1: "PD_Length ... MUST NOT be larger than 512"
V2_WORDS = 4
ENHANCED_RES = 0x10  # the first Res bit: Linux's "enhanced connection setup" flag
IRD_ORD_MASK = 0x3FFF  # RFC 6581 5.1: 14-bit IRD and ORD
P2P_FLAG, SEND_RTR_FLAG = 0x8000, 0x4000  # in the IRD word
WRITE_RTR_FLAG, READ_RTR_FLAG = 0x8000, 0x4000  # in the ORD word
DEFAULT_IRD_ORD = 4


def encode(kind: str, fields: Fields) -> bytes:
    """The bytes of an MPA ``kind`` ("mpa_request" or "mpa_reply") with ``fields`` as
    overrides; defaults: the right key, M=0, C=1, R=0, Rev 2 with IRD = ORD = 4, no
    peer-to-peer, no private data, PD_Length what follows."""
    key = hex_field(fields, "key", KEYS[kind])
    rev = int_field(fields, "rev", 2, 8)
    v2 = fields.get("v2", rev == 2)
    res = int_field(fields, "res", ENHANCED_RES if v2 else 0, 5)
    bits = (
        int_field(fields, "m", 0, 1) << 15
        | int_field(fields, "c", 1, 1) << 14
        | int_field(fields, "r", 0, 1) << 13
        | res << 8
        | rev
    )
    pd = (_words(fields) if v2 else b"") + hex_field(fields, "private_data", b"")
    pd_length = int_field(fields, "pd_length", len(pd), 16)
    return key + struct.pack("!HH", bits, pd_length) + pd


def _words(fields: Fields) -> bytes:
    """The two v2 words (RFC 6581 5.1) of ``fields``."""
    ird = int_field(fields, "ird", DEFAULT_IRD_ORD, 14)
    ord_ = int_field(fields, "ord", DEFAULT_IRD_ORD, 14)
    rtrs = fields.get("rtrs", [fields.get("rtr", "none")])
    if not isinstance(rtrs, list) or any(r not in RTR_KINDS for r in rtrs):
        raise FrameError(f"rtr: {rtrs!r}: each must be one of {', '.join(RTR_KINDS)}")
    ird |= int_field(fields, "p2p", 0, 1) * P2P_FLAG
    ird |= SEND_RTR_FLAG if "send" in rtrs else 0
    ord_ |= WRITE_RTR_FLAG if "write" in rtrs else 0
    ord_ |= READ_RTR_FLAG if "read" in rtrs else 0
    return struct.pack("!HH", ird, ord_)


def pd_length(header: bytes) -> int:
    """PD_Length of a frame's first HEADER bytes: how many bytes follow them."""
    return int(struct.unpack_from("!H", header, 18)[0])


def decode(kind: str, data: bytes) -> Fields:
    """The fields of an MPA ``kind`` frame in ``data`` (its header and private data);
    ``error`` says what is wrong with it (key, Rev, PD_Length, a short frame)."""
    if len(data) < HEADER:
        return {"key": data[:16].hex(), "error": short(kind, HEADER, len(data))}
    bits, length = struct.unpack_from("!HH", data, 16)
    got: Fields = {
        "key": data[:16].hex(),
        "m": bits >> 15 & 1,
        "c": bits >> 14 & 1,
        "r": bits >> 13 & 1,
        "res": bits >> 8 & 0x1F,
        "rev": bits & 0xFF,
        "pd_length": length,
    }
    pd = data[HEADER : HEADER + length]
    errors = _errors(kind, data, got, len(pd))
    if got["rev"] == 2 and len(pd) >= V2_WORDS:
        got.update(_decode_words(pd))
        pd = pd[V2_WORDS:]
    elif got["rev"] == 2:
        errors.append(f"Rev 2 without the IRD/ORD words (RFC 6581 5.1): {len(pd)} bytes")
    got["private_data"] = pd.hex()
    if errors:
        got["error"] = "; ".join(errors)
    return got


def _errors(kind: str, data: bytes, got: Fields, pd_got: int) -> list[str]:
    errors = []
    if data[:16] != KEYS[kind]:
        errors.append(f"key {data[:16]!r} is not {KEYS[kind]!r} (RFC 5044 7.1)")
    if got["rev"] not in (1, 2):
        errors.append(f"Rev {got['rev']} is neither 1 (RFC 5044 7.1) nor 2 (RFC 6581 5)")
    if got["pd_length"] > MAX_PD:
        errors.append(f"PD_Length {got['pd_length']} over {MAX_PD} (RFC 5044 7.1)")
    if pd_got < got["pd_length"]:
        errors.append(short("private data", got["pd_length"], pd_got))
    return errors


def _decode_words(pd: bytes) -> Fields:
    ird, ord_ = struct.unpack_from("!HH", pd)
    rtrs = [
        name
        for name, on in (
            ("write", ord_ & WRITE_RTR_FLAG),
            ("read", ord_ & READ_RTR_FLAG),
            ("send", ird & SEND_RTR_FLAG),
        )
        if on
    ]
    return {
        "v2": True,
        "ird": ird & IRD_ORD_MASK,
        "ord": ord_ & IRD_ORD_MASK,
        "p2p": 1 if ird & P2P_FLAG else 0,
        "rtr": rtrs[0] if rtrs else "none",
        "rtrs": rtrs,
    }


def reply_defaults(request: Fields) -> Fields:
    """What the peer answers ``request`` (its decoded fields) when a scenario overrides
    nothing: the same revision (2 at most) and CRC wish (RFC 5044 7.1: C=1 in either
    frame means CRCs both ways); ird = the request's ord and ord = its ird (RFC 6581 5.2:
    each side's IRD covers the other's ORD); its peer-to-peer mode and first RTR kind.
    Markers are refused cleanly: the peer never inserts them, so a request that asks for
    them (M=1: "Markers MUST be added when transmitting", RFC 5044 7.1) is answered with
    a reject (R=1, M=0) rather than a reply it could not honour."""
    rev = request.get("rev", 2)
    got: Fields = {
        "rev": rev if rev in (1, 2) else 2,
        "c": request.get("c", 1),
        "m": 0,
        "r": request.get("m", 0),
    }
    if got["rev"] == 2:
        got.update(
            ird=request.get("ord", DEFAULT_IRD_ORD),
            ord=request.get("ird", DEFAULT_IRD_ORD),
            p2p=request.get("p2p", 0),
            rtr=request.get("rtr", "none"),
        )
    return got
