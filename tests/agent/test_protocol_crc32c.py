"""CRC32c against RFC 3720 B.4's vectors (the CRC MPA uses, RFC 5044 6)."""

from __future__ import annotations

import pytest

from hil.agent.protocol.crc32c import crc32c, from_wire, wire_bytes

# RFC 3720 B.4: each data block and the CRC bytes as the RFC lists them (the wire order).
READ_PDU = bytes.fromhex(
    "01c00000000000000000000000000000140000000000040000000014000000182800000000000000"
    "0200000000000000"
)
VECTORS = [
    (bytes(32), "aa36918a"),
    (b"\xff" * 32, "43aba862"),
    (bytes(range(32)), "4e79dd46"),
    (bytes(range(31, -1, -1)), "5cdb3f11"),
    (READ_PDU, "563a96d9"),
]


@pytest.mark.parametrize(("data", "wire"), VECTORS)
def test_rfc3720_b4_vectors(data: bytes, wire: str) -> None:
    assert wire_bytes(crc32c(data)).hex() == wire
    assert from_wire(bytes.fromhex(wire)) == crc32c(data)


def test_the_check_value_of_the_catalogue() -> None:
    # CRC-32C/ISCSI's check value (the CRC of "123456789", RFC 3385's polynomial).
    assert crc32c(b"123456789") == 0xE3069283
