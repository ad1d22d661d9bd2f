"""Frames as data: every frame is a JSON-able dict of fields (the shared vocabulary of
issue 26, docs/peer.md); encoders take field overrides, decoders return fields.

An encoder takes any field of its frame as an override, so a scenario can send wrong
lengths, keys, CRCs or opcodes; an override that cannot be encoded at all (not an
integer, too wide for its field, not hex) is a :class:`FrameError` naming the field.
A decoder never raises: what it could not decode is said in the ``error`` field.
"""

from __future__ import annotations

from typing import Any

Fields = dict[str, Any]  # a frame's fields
RAW_KEPT = 256  # bytes of a frame's raw bytes the record keeps


class FrameError(ValueError):
    """A field override that cannot be encoded; the message names the field."""


def int_field(fields: Fields, name: str, default: int, bits: int) -> int:
    """``fields[name]`` (else ``default``), an integer that fits in ``bits`` bits."""
    value = fields.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise FrameError(f"{name}: {value!r} is not an integer")
    if not 0 <= value < 1 << bits:
        raise FrameError(f"{name}: {value} does not fit in {bits} bits")
    return value


def hex_field(fields: Fields, name: str, default: bytes) -> bytes:
    """``fields[name]`` (else ``default``), bytes given as a hex string."""
    value = fields.get(name)
    if value is None:
        return default
    if not isinstance(value, str):
        raise FrameError(f"{name}: {value!r} is not a hex string")
    try:
        return bytes.fromhex(value)
    except ValueError:
        raise FrameError(f"{name}: {value[:40]!r} is not hex") from None


def raw(data: bytes) -> str:
    """The record's ``raw``: the first RAW_KEPT bytes, hex."""
    return data[:RAW_KEPT].hex()


def short(what: str, need: int, got: int) -> str:
    """The ``error`` of a frame cut short."""
    return f"{what}: {got} bytes, {need} needed"
