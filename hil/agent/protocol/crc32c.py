"""CRC32c (Castagnoli), the MPA CRC: RFC 5044 6 uses the CRC of iSCSI, RFC 3385 / RFC 3720
12.1 and B.4 (polynomial 0x1EDC6F41, reflected 0x82F63B78, initial value and final XOR
0xFFFFFFFF).  ``zlib.crc32`` is the other polynomial; the stdlib has no CRC32c, so this is
a table-driven one (fast enough for a test peer: frames are small)."""

from __future__ import annotations

_POLY = 0x82F63B78  # 0x1EDC6F41 bit-reversed (RFC 3385 4)


def _table() -> tuple[int, ...]:
    rows = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ _POLY if crc & 1 else crc >> 1
        rows.append(crc)
    return tuple(rows)


_TABLE = _table()


def crc32c(data: bytes) -> int:
    """The CRC32c of ``data`` as an integer.  On the wire MPA sends its four bytes least
    significant first (``wire_bytes``): RFC 3720 B.4 lists its vectors so, and Linux siw
    compares the trailer as a __le32 (drivers/infiniband/sw/siw/siw_qp_rx.c,
    siw_get_trailer, Linux 6.15: "it's a __le32")."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc = _TABLE[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def wire_bytes(crc: int) -> bytes:
    """The four bytes an FPDU's CRC field carries for ``crc``."""
    return (crc & 0xFFFFFFFF).to_bytes(4, "little")


def from_wire(raw: bytes) -> int:
    """The CRC an FPDU's four CRC bytes carry (``wire_bytes``' inverse)."""
    return int.from_bytes(raw, "little")
