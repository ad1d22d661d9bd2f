"""The TERMINATE tables (RFC 5040 7.4, RFC 5041 7.2, RFC 5044 8) and decode."""

from __future__ import annotations

import pytest

from hil.judge.terminate import ERROR_CODES, ERROR_TYPES, ErrorCode, ErrorType, decode, lookup


def test_every_entry_names_its_rfc_section() -> None:
    entries: list[ErrorType | ErrorCode] = [*ERROR_TYPES, *ERROR_CODES]
    for entry in entries:
        assert entry.name and entry.section.startswith("RFC "), entry


def test_every_code_belongs_to_a_known_error_type() -> None:
    types = {(t.layer, t.etype) for t in ERROR_TYPES}
    assert all((c.layer, c.etype) in types for c in ERROR_CODES)


@pytest.mark.parametrize(
    ("triple", "name"),
    [
        ((1, 1, 0x00), "DDP / Tagged Buffer Error / Invalid STag (RFC 5041 7.2)"),
        ((1, 2, 0x05), "DDP / Untagged Buffer Error / DDP Message too long for available buffer"),
        ((0, 2, 0x06), "RDMAP / Remote Operation Error / Unexpected OpCode (RFC 5040 7.4)"),
        ((0, 0, 0x42), "RDMAP / Local Catastrophic Error / Local Catastrophic Error"),
        ((2, 0, 0x02), "LLP / MPA Error / MPA CRC Error (RFC 5044 8)"),
        ((2, 0, 0x07), "LLP / MPA Error / No Matching RTR Option"),
    ],
)
def test_decode_names_known_codes(triple: tuple[int, int, int], name: str) -> None:
    assert decode(*triple).startswith(name)


@pytest.mark.parametrize(
    ("triple", "name"),
    [
        ((2, 0, 0x09), "LLP / MPA Error / unknown code 0x09"),
        ((1, 7, 0x00), "DDP / unknown error type 0x07 / code 0x00"),
        ((5, 1, 0x01), "unknown layer 0x05 / error type 0x01 / code 0x01"),
        (("x", None, -1), "unknown layer 'x' / error type None / code -1"),
    ],
)
def test_decode_names_unknown_codes_without_raising(triple: tuple[object, ...], name: str) -> None:
    assert decode(*triple).startswith(name)


def test_lookup_gives_none_for_unknown_codes() -> None:
    assert lookup(1, 2, 0x00) is None
    assert lookup(1, 2, 0x01) is not None
