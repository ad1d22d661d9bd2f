"""hil.wire.corrupted: which segments count as corrupted on the path, on real captures
(tests/data/wire, README.md there) and on tshark's fields for one packet."""

from __future__ import annotations

from pathlib import Path

import pytest

from hil.wire import corrupted, tshark

DATA = Path(__file__).resolve().parents[1] / "data" / "wire"


def _segment(src: str, port: str, status: str, length: str = "0") -> tshark.Fields:
    return {
        "ip.src": [src],
        "tcp.srcport": [port],
        "tcp.len": [length],
        "tcp.checksum.status": [status],
    }


def test_a_bad_sum_counts_only_where_most_of_its_senders_are_good() -> None:
    broken = _segment("198.18.0.1", "4000", "0", "24")
    packets = [
        *[_segment("198.18.0.1", "4000", "1")] * 3,
        _segment("198.18.0.1", "4000", "2"),
        broken,
        _segment("198.18.0.2", "7174", "0"),  # most of this sender's are bad: offload
        _segment("198.18.0.2", "7174", "0", "24"),
        _segment("198.18.0.2", "7174", "1"),  # ... but for an RST the kernel summed itself
        {"ip.src": ["198.18.0.1"], "tcp.srcport": ["4000"], "tcp.checksum.status": ["0"]},
    ]
    assert corrupted.corrupted(packets) == [broken]


@pytest.mark.parametrize("name", ["mpa-accept-close-fin", "pull-carrier-retransmits"])
def test_loopbacks_partial_sums_are_offload_and_the_capture_is_read_once(name: str) -> None:
    """Loopback's segments carry a partial sum (offload at the tap): none is left out, also
    where the kernel summed an RST itself (pull-carrier-retransmits: 1 good, 5 bad)."""
    path = DATA / f"{name}.pcap"
    reading = corrupted.read(path, timeout=60)
    assert (reading.left_out_empty, reading.left_out_data) == (0, 0)
    assert reading.read.packets == tshark.read(path, timeout=60).packets


def test_frames_are_numbered_as_in_the_file_that_held_the_broken_ones(tmp_path: Path) -> None:
    """Frames 3 and 5 written out: the copy's frames 1..4 are the file's 1, 2, 4, 6."""
    path = DATA / "rping-siw.pcap"
    kept = tmp_path / "kept.pcapng"
    tshark.write_without(path, [3, 5], kept, timeout=60)
    copy = tshark.read(kept, timeout=60).packets
    original = {f["frame.number"][0]: f for f in tshark.read(path, timeout=60).packets}
    for f in copy[:6]:
        back = corrupted.renumbered(f, [3, 5])
        assert back["frame.number"][0] not in ("3", "5")
        assert back["tcp.seq_raw"] == original[back["frame.number"][0]]["tcp.seq_raw"]
