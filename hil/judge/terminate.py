"""The TERMINATE message's Layer / Error Type / Error Code tables, as data.

RFC 5040 section 7.4 lists every code a TERMINATE carries (RFC 5040 4.8 is its
header): layer 0 RDMAP (RFC 5040 7.4), layer 1 DDP (RFC 5041 7.2), layer 2 the
LLP, for MPA error type 0 with the codes of RFC 5044 section 8 and the
enhanced-setup codes RFC 6581 added.  IANA keeps them as the RDDP registries
(RFC 6580, https://www.iana.org/assignments/rddp/); the names here are the
registry's and RFC 5040's, checked against siw's ``iwarp.h`` (enum term_elayer
.. llp_ecode, Linux 6.1.192) and Wireshark's iWARP dissector.

:func:`decode` names any triple and never raises: a code no table holds is named
as unknown, so a fuzzed or broken TERMINATE still reads.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum


class Layer(IntEnum):
    """The TERMINATE's Layer field (RFC 5040 4.8, 7.4)."""

    RDMAP = 0
    DDP = 1
    LLP = 2


@dataclass(frozen=True)
class ErrorType:
    """One Error Type of a layer, with the RFC section that defines it."""

    layer: Layer
    etype: int
    name: str
    section: str


@dataclass(frozen=True)
class ErrorCode:
    """One Error Code; ``ecode`` None: any code (RDMAP's Local Catastrophic Error)."""

    layer: Layer
    etype: int
    ecode: int | None
    name: str
    section: str


_R, _D, _L = "RFC 5040 7.4", "RFC 5041 7.2", "RFC 5044 8"
_E = "RFC 6581 (IANA RDDP 'MPA Errors', RFC 6580)"

ERROR_TYPES: tuple[ErrorType, ...] = (
    ErrorType(Layer.RDMAP, 0x0, "Local Catastrophic Error", _R),
    ErrorType(Layer.RDMAP, 0x1, "Remote Protection Error", _R),
    ErrorType(Layer.RDMAP, 0x2, "Remote Operation Error", _R),
    ErrorType(Layer.DDP, 0x0, "Local Catastrophic Error", _D),
    ErrorType(Layer.DDP, 0x1, "Tagged Buffer Error", _D),
    ErrorType(Layer.DDP, 0x2, "Untagged Buffer Error", _D),
    ErrorType(Layer.DDP, 0x3, "Reserved for the use by the LLP", _D),
    ErrorType(Layer.LLP, 0x0, "MPA Error", _L),
)

ERROR_CODES: tuple[ErrorCode, ...] = (
    ErrorCode(Layer.RDMAP, 0x0, None, "Local Catastrophic Error", _R),
    ErrorCode(Layer.RDMAP, 0x1, 0x00, "Invalid STag", _R),
    ErrorCode(Layer.RDMAP, 0x1, 0x01, "Base or bounds violation", _R),
    ErrorCode(Layer.RDMAP, 0x1, 0x02, "Access rights violation", _R),
    ErrorCode(Layer.RDMAP, 0x1, 0x03, "STag not associated with RDMAP Stream", _R),
    ErrorCode(Layer.RDMAP, 0x1, 0x04, "TO wrap", _R),
    ErrorCode(Layer.RDMAP, 0x1, 0x09, "STag cannot be invalidated", _R),
    ErrorCode(Layer.RDMAP, 0x1, 0xFF, "Unspecified Error", _R),
    ErrorCode(Layer.RDMAP, 0x2, 0x05, "Invalid RDMAP version", _R),
    ErrorCode(Layer.RDMAP, 0x2, 0x06, "Unexpected OpCode", _R),
    ErrorCode(Layer.RDMAP, 0x2, 0x07, "Catastrophic error, localized to RDMAP Stream", _R),
    ErrorCode(Layer.RDMAP, 0x2, 0x08, "Catastrophic error, global", _R),
    ErrorCode(Layer.RDMAP, 0x2, 0x09, "STag cannot be Invalidated", _R),
    ErrorCode(Layer.RDMAP, 0x2, 0xFF, "Unspecified Error", _R),
    ErrorCode(Layer.DDP, 0x0, 0x00, "Local Catastrophic Error", _D),
    ErrorCode(Layer.DDP, 0x1, 0x00, "Invalid STag", _D),
    ErrorCode(Layer.DDP, 0x1, 0x01, "Base or bounds violation", _D),
    ErrorCode(Layer.DDP, 0x1, 0x02, "STag not associated with DDP Stream", _D),
    ErrorCode(Layer.DDP, 0x1, 0x03, "TO wrap", _D),
    ErrorCode(Layer.DDP, 0x1, 0x04, "Invalid DDP version", _D),
    ErrorCode(Layer.DDP, 0x2, 0x01, "Invalid QN", _D),
    ErrorCode(Layer.DDP, 0x2, 0x02, "Invalid MSN - no buffer available", _D),
    ErrorCode(Layer.DDP, 0x2, 0x03, "Invalid MSN - MSN range is not valid", _D),
    ErrorCode(Layer.DDP, 0x2, 0x04, "Invalid MO", _D),
    ErrorCode(Layer.DDP, 0x2, 0x05, "DDP Message too long for available buffer", _D),
    ErrorCode(Layer.DDP, 0x2, 0x06, "Invalid DDP version", _D),
    ErrorCode(Layer.LLP, 0x0, 0x01, "TCP connection closed, terminated or lost", _L),
    ErrorCode(Layer.LLP, 0x0, 0x02, "MPA CRC Error", _L),
    ErrorCode(Layer.LLP, 0x0, 0x03, "MPA Marker and ULPDU Length field mismatch", _L),
    ErrorCode(Layer.LLP, 0x0, 0x04, "Invalid MPA Request Frame or MPA Response Frame", _L),
    ErrorCode(Layer.LLP, 0x0, 0x05, "Local Catastrophic Error", _E),
    ErrorCode(Layer.LLP, 0x0, 0x06, "Insufficient IRD Resources", _E),
    ErrorCode(Layer.LLP, 0x0, 0x07, "No Matching RTR Option", _E),
)

_TYPES: dict[tuple[int, int], ErrorType] = {(t.layer, t.etype): t for t in ERROR_TYPES}
_CODES: dict[tuple[int, int, int | None], ErrorCode] = {
    (c.layer, c.etype, c.ecode): c for c in ERROR_CODES
}


def lookup(layer: int, etype: int, ecode: int) -> ErrorCode | None:
    """The table's entry for the triple, None when no table holds it."""
    return _CODES.get((layer, etype, ecode)) or _CODES.get((layer, etype, None))


def _num(value: object) -> str:
    return f"0x{value:02x}" if isinstance(value, int) and value >= 0 else repr(value)


def decode(layer: object, etype: object, ecode: object) -> str:
    """``DDP / Tagged Buffer Error / Invalid STag (RFC 5041 7.2)``; a layer, type or code
    no table holds is named ``unknown layer 0x05``, ``unknown error type 0x05`` or
    ``unknown code 0x42``.  Never raises, whatever the values (a fuzzed TERMINATE)."""
    ints = all(isinstance(v, int) for v in (layer, etype, ecode))
    if not ints or layer not in Layer._value2member_map_:
        head = f"unknown layer {_num(layer)}"
        return f"{head} / error type {_num(etype)} / code {_num(ecode)}"
    assert isinstance(layer, int) and isinstance(etype, int) and isinstance(ecode, int)
    head = Layer(layer).name
    kind = _TYPES.get((layer, etype))
    if kind is None:
        return f"{head} / unknown error type {_num(etype)} / code {_num(ecode)}"
    code = lookup(layer, etype, ecode)
    if code is None:
        return f"{head} / {kind.name} / unknown code {_num(ecode)} ({kind.section})"
    return f"{head} / {kind.name} / {code.name} ({code.section})"
