"""Complete records in a slice of a growing pcap file (pcap-savefile(5))."""

from __future__ import annotations

import struct

import pytest

from hil.errors import InputError
from hil.wire import pcapwindow

# A little-endian pcap header as tcpdump writes it on x86: magic, version 2.4, zone,
# sigfigs, snaplen 512, link type 1 (Ethernet).
HEADER = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 512, 1)


def record(size: int, order: str = "<") -> bytes:
    return struct.pack(f"{order}IIII", 1, 2, size, size) + bytes(size)


def test_the_byte_order_comes_from_the_magic_number() -> None:
    assert pcapwindow.byte_order(HEADER) == "<"
    assert pcapwindow.byte_order(struct.pack(">IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 512, 1)) == ">"
    nano = struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 512, 1)
    assert pcapwindow.byte_order(nano) == "<"


@pytest.mark.parametrize("header", [b"", b"\x0a\x0d\x0d\x0a" + bytes(20), HEADER[:10]])
def test_a_file_that_is_no_pcap_is_refused(header: bytes) -> None:
    with pytest.raises(InputError, match="not a pcap file header"):
        pcapwindow.byte_order(header)


def test_only_complete_records_are_taken_the_cut_one_waits() -> None:
    data = record(60) + record(100) + record(80)[:50]  # tcpdump is writing the third
    found = pcapwindow.records(data, "<", limit=10)
    assert found == pcapwindow.Records(complete=16 + 60 + 16 + 100, kept=192, packets=2)


def test_the_first_packets_up_to_the_limit_are_kept_all_are_counted() -> None:
    data = record(60) + record(100) + record(80)
    found = pcapwindow.records(data, "<", limit=1)
    assert (found.complete, found.kept, found.packets) == (len(data), 76, 3)


def test_a_big_endian_file_is_read_in_its_order() -> None:
    data = record(300, ">") + record(20, ">")
    assert pcapwindow.records(data, ">", limit=5).packets == 2
    assert pcapwindow.records(b"", "<", limit=5) == pcapwindow.Records(0, 0, 0)
