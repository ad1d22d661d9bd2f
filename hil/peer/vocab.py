"""The field vocabulary of peer frames: each field's name, value type, range and source.

The names are the shared ones of issue 26 (docs/peer-scenarios.md lists them):
a scenario's send step overrides these fields of the frame it sends, an expect
step compares them with the frame it receives.  :meth:`Field.problem` says what is
wrong with one value, so the scenario loader names the file, the step and the
field; the fuzzer draws its values from :meth:`Field.boundaries` and
:meth:`Field.draw`, so every mutated frame stays within this vocabulary and its
replay file loads again.

Names beyond the shared vocabulary:

- the peer codec's own (hil/agent/remote/peer on engineer peercore's branch):
  ``v2`` (the MPA v2 words present), ``rdmap_rsvd`` and ``rsvdulp`` (the RDMAP
  control byte's reserved bits, the untagged header's 32-bit RsvdULP),
  ``term_rsvd``, ``ddp_header`` and ``rdma_header`` (a TERMINATE's reserved
  bits and its copied headers, hex), ``crc`` "none" (left out though
  negotiated); its ``rtrs`` (a list of RTR kinds) is not one here yet;
- the codec's and this module's: ``opcode`` may be an integer 0..15, the raw field (RFC
  5040 4.3), so a scenario can send the reserved opcodes 8..15; ``truncate``
  (a send step's, beside ``segments``): only the first N bytes of the step's
  frames are written, the rest never (an MPA request that never completes: the
  DUT's MPA timeout, RFC 5044 7.1; a cut FPDU).
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from typing import Literal

from hil.agent.protocol import PEER_OPCODES as OPCODES
from hil.agent.protocol import RTR_KINDS

Value = int | str | bool
Kind = Literal["bit", "int", "hex", "choice", "bool", "crc", "opcode"]

# RFC 5044 7.1: the keys of a request and a reply ("MPA ID Req Frame", "MPA ID Rep Frame").
REQUEST_KEY = b"MPA ID Req Frame".hex()
REPLY_KEY = b"MPA ID Rep Frame".hex()
_HEX = re.compile(r"(?:[0-9a-fA-F]{2})*")
_U32 = 0xFFFF_FFFF
_U64 = 0xFFFF_FFFF_FFFF_FFFF


@dataclass(frozen=True)
class Field:
    """One overridable field: ``kind`` says its values (``high`` bounds an ``int`` from 0).

    ``length``: it counts bytes (the fuzzer's length mutations pick these);
    ``special``: values worth trying beyond the bounds (a limit an RFC sets);
    ``source``: where the field is defined.
    """

    name: str
    kind: Kind
    source: str
    high: int = 1
    length: bool = False
    special: tuple[int, ...] = ()

    def problem(self, value: object) -> str | None:
        """What is wrong with ``value`` for this field, or None when it is one of its values."""
        if self.kind == "bool":
            return None if isinstance(value, bool) else f"expected true or false, got {value!r}"
        if self.kind == "hex":
            ok = isinstance(value, str) and _HEX.fullmatch(value)
            return None if ok else f"expected a hex string of whole bytes, got {value!r}"
        if self.kind == "choice" or (self.kind == "opcode" and isinstance(value, str)):
            names = RTR_KINDS if self.kind == "choice" else OPCODES
            return None if value in names else f"{value!r} is not one of: {', '.join(names)}"
        if self.kind == "crc" and isinstance(value, str):
            named = value in ("good", "bad", "none")
            return None if named else f"{value!r} is not good, bad, none or a number"
        return _integer_problem(value, self.high)

    def boundaries(self) -> tuple[Value, ...]:
        """The values at this field's edges, and its special ones."""
        if self.kind == "bool":
            return (False, True)
        if self.kind == "hex":
            return ("", "00", "ff" * 64)
        if self.kind == "choice":
            return RTR_KINDS
        if self.kind == "opcode":
            return (*OPCODES, 8, 15)  # 8..15: reserved (RFC 5040 4.3)
        edges: tuple[Value, ...] = (0, 1, self.high - 1, self.high, *self.special)
        return (*edges, "bad", "none") if self.kind == "crc" else edges

    def draw(self, rng: random.Random) -> Value:
        """A random value of this field."""
        if self.kind == "hex":
            return rng.randbytes(rng.randint(0, 64)).hex()
        if self.kind in ("int", "crc"):
            return rng.randint(0, self.high)
        return rng.choice(self.boundaries())


def _integer_problem(value: object, high: int) -> str | None:
    # bool is an int to Python, never to a scenario: "m: true" is a mistake for "m: 1".
    if isinstance(value, bool) or not isinstance(value, int):
        return f"expected an integer 0..{high}, got {value!r}"
    return None if 0 <= value <= high else f"{value} is out of range 0..{high}"


def _bits(name: str, source: str) -> tuple[Field, ...]:
    return tuple(Field(n, "bit", source) for n in name.split())


MPA = (
    Field("key", "hex", "RFC 5044 7.1"),
    *_bits("m c r", "RFC 5044 7.1"),
    Field("res", "int", "RFC 5044 7.1", high=0x1F),
    Field("rev", "int", "RFC 5044 7.1; RFC 6581 5", high=0xFF, special=(1, 2, 3)),
    Field("v2", "bool", "RFC 6581 5.1"),
    # RFC 5044 7.1: PD_Length at most 512.
    Field("pd_length", "int", "RFC 5044 7.1", high=0xFFFF, length=True, special=(512, 513)),
    Field("private_data", "hex", "RFC 5044 7.1"),
    Field("ird", "int", "RFC 6581 5.1", high=0x3FFF),
    Field("ord", "int", "RFC 6581 5.1", high=0x3FFF),
    Field("p2p", "bit", "RFC 6581 5.1"),
    Field("rtr", "choice", "RFC 6581 5.1"),
)
FRAMING = (
    Field("ulpdu_length", "int", "RFC 5044 4", high=0xFFFF, length=True),
    Field("pad", "int", "RFC 5044 4", high=3),
    Field("crc", "crc", "RFC 5044 4", high=_U32),
    Field("markers", "bool", "RFC 5044 4"),
)
DDP = (
    *_bits("t l", "RFC 5041 4"),
    # DDP's version is 1 and RDMAP's 1 (RFC 5041 4, RFC 5040 4); RDMAP uses queues 0..2 only.
    Field("dv", "int", "RFC 5041 4", high=3, special=(1,)),
    Field("rsvd", "int", "RFC 5041 4", high=0xF),
    Field("rdmap_rsvd", "int", "RFC 5040 4", high=3),
    Field("rsvdulp", "int", "RFC 5041 4; RFC 5040 4.3", high=_U32),
    Field("stag", "int", "RFC 5041 4", high=_U32),
    Field("to", "int", "RFC 5041 4", high=_U64),
    Field("qn", "int", "RFC 5041 4", high=_U32, special=(3,)),
    Field("msn", "int", "RFC 5041 4", high=_U32),
    Field("mo", "int", "RFC 5041 4", high=_U32),
)
RDMAP = (
    Field("rv", "int", "RFC 5040 4", high=3, special=(1,)),
    Field("opcode", "opcode", "RFC 5040 4.3", high=0xF),
    Field("sink_stag", "int", "RFC 5040 4", high=_U32),
    Field("sink_to", "int", "RFC 5040 4", high=_U64),
    Field("size", "int", "RFC 5040 4", high=_U32, length=True),
    Field("source_stag", "int", "RFC 5040 4", high=_U32),
    Field("source_to", "int", "RFC 5040 4", high=_U64),
    Field("layer", "int", "RFC 5040 4.8", high=0xF),
    Field("etype", "int", "RFC 5040 4.8", high=0xF),
    Field("ecode", "int", "RFC 5040 4.8", high=0xFF),
    *_bits("hdrct_m hdrct_d hdrct_r", "RFC 5040 4.8"),
    Field("ddp_seg_len", "int", "RFC 5040 4.8", high=0xFFFF, length=True),
    Field("term_rsvd", "int", "RFC 5040 4.8", high=0x1FFF),
    Field("ddp_header", "hex", "RFC 5040 4.8"),
    Field("rdma_header", "hex", "RFC 5040 4.8"),
    Field("payload", "hex", "RFC 5040 4"),
)

# The fields of each frame kind; a close (fin, rst) has none.
FIELDS: dict[str, dict[str, Field]] = {
    "mpa_request": {f.name: f for f in MPA},
    "mpa_reply": {f.name: f for f in MPA},
    "fpdu": {f.name: f for f in (*FRAMING, *DDP, *RDMAP)},
    "fin": {},
    "rst": {},
}
# What a send step of each kind must name: an FPDU is built from its opcode.
REQUIRED = {"fpdu": ("opcode",)}
