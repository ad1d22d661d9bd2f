"""The MPA negotiation matrix as built-in peer scenarios (issue 26 item 3, first bullet).

:data:`MATRIX` is their data: :mod:`hil.peer.builtin` registers it into its
``SCENARIOS`` with the other built-ins (this module imports nothing of it, so the two
make no import cycle), and names it in ``IPV4_ONLY``: what they negotiate (Rev, CRC,
Markers, P2P and its RTR, IRD/ORD) is in the MPA frames, the same in either address
family.

- The peer initiates (``neg-*``): Rev 1 and 2, CRC asked for or not (RFC 5044 7.1),
  Markers asked for (M=1), peer-to-peer mode offering one RTR type each (SEND, WRITE,
  READ; RFC 6581 5.1-5.2) and then sending that zero-length RTR, IRD/ORD 0, 0x3FFF and
  256 (above siw's and iw_cxgb4's maximum).  The DUT accepts, and the connection must
  carry a SEND intact.
- The DUT initiates (``neg-dut-*``): the peer's reply picks each RTR type, or
  answers IRD/ORD 0, 0x3FFF or 256.  Where the RFC lets the DUT refuse (a reply ORD
  above its IRD) the scenario sends nothing after the reply; elsewhere a SEND must
  arrive intact.

The ``expect`` steps hold only what RFC 5044/6581 ask of any DUT.  What the DUT's
reply or request carries (``dut_mpa``), its close and its CM events are its
provider's, in :mod:`hil.judge.peerproviders`, with their sources.
"""

from __future__ import annotations

from typing import Any

# Lab policy, as hil/peer/builtin.py's: what the DUT owes at once comes within 5 s.
PROMPT_S = 5.0
HIL = b"hil".hex()
_LISTEN: list[dict[str, Any]] = [
    {"step": "dut", "action": "listen"},
    {"step": "dut", "action": "post_recv", "args": {"length": 64}},
]
_SEND_HIL = {"step": "send", "frame": "fpdu", "opcode": "send", "payload": HIL}
_RECV_HIL = {"step": "dut", "action": "recv", "args": {"payload": HIL}}
# Above siw's 128 (siw.h SIW_MAX_IRD_QP) and iw_cxgb4's cur_max_read_depth (cm.c), below
# the 14-bit field's 0x3FFF (RFC 6581 5.1).
ABOVE_MAX = 256
_DELIVERED = [_SEND_HIL, _RECV_HIL]
# Between the peer's reply and its first FPDU when the DUT initiates: siw fails the connect
# when an FPDU follows the reply at once (the reply_and_fpdu_one_segment finding, seen
# here on the lab 2026-12-05: connect_error, RST), which is reply-with-first-fpdu's test.
APART_S = 1.0
# The zero-length RTR message of each kind (RFC 6581 5.2): a SEND, an RDMA WRITE, or an
# RDMA READ Request of size 0.
_RTR: dict[str, dict[str, Any]] = {
    "send": {"step": "send", "frame": "fpdu", "opcode": "send", "payload": ""},
    "write": {"step": "send", "frame": "fpdu", "opcode": "write", "payload": ""},
    "read": {"step": "send", "frame": "fpdu", "opcode": "read_request", "size": 0},
}
# A zero-length SEND consumes one of the DUT's receives (RFC 6581 5.2): take its completion
# before the SEND whose bytes are checked.
_RTR_RECV: dict[str, list[dict[str, Any]]] = {
    "send": [{"step": "dut", "action": "recv"}],
    "write": [],
    "read": [],
}


def _responder(
    name: str, expectation: str, description: str, request: dict[str, Any], *after: Any
) -> dict[str, Any]:
    """The DUT listens and accepts the peer's request; the reply must not be a reject
    and must keep the request's Rev (RFC 5044 7.1.1, RFC 6581 5)."""
    reply = {"r": 0, "rev": request.get("rev", 2)}
    return {
        "name": name,
        "role": "active",
        "expectation": expectation,
        "description": description,
        "steps": [
            *_LISTEN,
            {"step": "send", "frame": "mpa_request", **request},
            {"step": "dut", "action": "accept"},
            {"step": "expect", "frame": "mpa_reply", "within": PROMPT_S, "fields": reply},
            *(after or _DELIVERED),
        ],
    }


def _initiator(
    name: str, expectation: str, description: str, reply: dict[str, Any], *after: Any
) -> dict[str, Any]:
    """The DUT connects to the peer; the peer answers with ``reply``'s overrides."""
    return {
        "name": name,
        "role": "passive",
        "expectation": expectation,
        "description": description,
        "steps": [
            {"step": "dut", "action": "post_recv", "args": {"length": 64}},
            {"step": "dut", "action": "connect"},
            {"step": "expect", "frame": "mpa_request", "within": PROMPT_S},
            {"step": "send", "frame": "mpa_reply", **reply},
            *([{"step": "sleep", "seconds": APART_S}] if after else []),
            *after,
        ],
    }


def _p2p(rtr: str) -> dict[str, Any]:
    return _responder(
        f"neg-p2p-{rtr}",
        f"p2p_rtr_{rtr}",
        f"MPA v2 request in peer-to-peer mode offering the zero-length {rtr.upper()} RTR "
        "alone; the peer sends that RTR, then a SEND",
        {"rev": 2, "c": 1, "p2p": 1, "rtr": rtr},
        _RTR[rtr],
        *_RTR_RECV[rtr],
        *_DELIVERED,
    )


def _ird_ord(tag: str, value: int, expectation: str) -> dict[str, Any]:
    return _responder(
        f"neg-ird-ord-{tag}",
        expectation,
        f"MPA v2 request with IRD and ORD {value:#x}; the reply's are the DUT's (RFC 6581 5.1)",
        {"rev": 2, "c": 1, "ird": value, "ord": value},
    )


def _dut(
    tag: str, expectation: str, what: str, reply: dict[str, Any], *after: Any
) -> dict[str, Any]:
    return _initiator(
        f"neg-dut-{tag}", expectation, f"the DUT connects; the peer's reply {what}", reply, *after
    )


# The peer initiates: name, class, what, the request's fields.
_REQUESTS: list[tuple[str, str, str, dict[str, Any]]] = [
    ("neg-rev1", "mpa_rev1", "MPA Rev 1 request, no CRC asked for; a SEND", {"rev": 1, "c": 0}),
    (
        "neg-rev1-crc",
        "crc_requested",
        "MPA Rev 1 request asking for CRC (C=1): CRC is used both ways; a SEND",
        {"rev": 1, "c": 1},
    ),
    (
        "neg-rev2-no-crc",
        "crc_not_requested",
        "MPA v2 request not asking for CRC (C=0): the reply's C is the DUT's wish; a SEND",
        {"rev": 2, "c": 0},
    ),
    (
        "neg-markers",
        "markers_requested",
        "MPA v2 request asking for Markers (M=1); the peer never sends them itself; a SEND",
        {"rev": 2, "c": 1, "m": 1},
    ),
]

MATRIX: list[dict[str, Any]] = [
    *(_responder(*cell) for cell in _REQUESTS),
    *(_p2p(rtr) for rtr in ("send", "write", "read")),
    _responder(
        "neg-p2p-bad-rtr",
        "p2p_bad_rtr",
        "MPA v2 request in peer-to-peer mode offering the zero-length WRITE RTR; where "
        "that RTR belongs the peer sends its MPA request again",
        {"rev": 2, "c": 1, "p2p": 1, "rtr": "write"},
        {"step": "send", "frame": "mpa_request", "rev": 2, "c": 1, "p2p": 1, "rtr": "write"},
        {"step": "expect", "frame": "close", "within": PROMPT_S},
    ),
    _ird_ord("0", 0, "ird_ord_zero"),
    _ird_ord("3fff", 0x3FFF, "ird_ord_3fff"),
    _ird_ord("over-max", ABOVE_MAX, "ird_ord_above_max"),
    *(
        _dut(
            f"p2p-{r}",
            f"p2p_reply_rtr_{r}",
            f"asks for P2P with the {r.upper()} RTR; a SEND",
            {"p2p": 1, "rtr": r},
            *_DELIVERED,
        )
        for r in ("send", "write", "read")
    ),
    _dut(
        "ird-ord-0",
        "ird_ord_reply_zero",
        "has IRD and ORD 0; a SEND",
        {"ird": 0, "ord": 0},
        *_DELIVERED,
    ),
    _dut(
        "ird-ord-3fff",
        "ird_ord_reply_3fff",
        "has IRD and ORD 0x3FFF",
        {"ird": 0x3FFF, "ord": 0x3FFF},
    ),
    _dut(
        "ird-ord-over-max",
        "ird_ord_reply_above_max",
        f"has IRD and ORD {ABOVE_MAX}",
        {"ird": ABOVE_MAX, "ord": ABOVE_MAX},
    ),
]
