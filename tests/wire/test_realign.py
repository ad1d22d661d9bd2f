"""hil.wire.realign: FPDUs tshark's reassembly lost after a frame cut by the snap length."""

from __future__ import annotations

from pathlib import Path

import pytest

from hil.wire import realign, tshark
from hil.wire.decode import decode

DATA = Path(__file__).resolve().parents[1] / "data" / "wire"
LOST = DATA / "remote-access-snaplen-realign.pcap"
RPING = DATA / "rping-siw.pcap"
SINK = "198.18.0.2"


def _terminates(packets: list[tshark.Fields]) -> list[str]:
    return [f["frame.number"][0] for f in packets if "iwarp_rdma.term_layer" in f]


def test_the_capture_loses_the_terminate_to_tsharks_reassembly() -> None:
    # The scenario itself: without realignment the data sink's TERMINATE is not decoded.
    assert _terminates(tshark.read(LOST, timeout=60).packets) == []
    assert _terminates(tshark.read(LOST, timeout=60, desegment=False).packets) == ["240"]


def test_the_data_sinks_terminate_is_recovered_with_a_note() -> None:
    exchange = decode({"b": LOST})
    found = [
        (p.frame, p.src[0], p.terminate)
        for c in exchange.connections
        for p in c.packets
        if p.terminate is not None
    ]
    assert [(frame, src) for frame, src, _ in found] == [(240, SINK)]
    term = found[0][2]
    assert term is not None
    assert (term.layer, term.error_type, term.error_code) == ("DDP", 1, 0)  # RFC 5041 7.2
    assert any("decoded segment by segment" in n for n in exchange.notes)


def test_only_undecoded_segments_are_taken_from_the_second_reading() -> None:
    first = tshark.read(LOST, timeout=60).packets
    realigned = realign.read(LOST, timeout=60)
    changed = [
        (a["frame.number"][0], any(k.startswith("iwarp_mpa.") for k in a))
        for a, b in zip(first, realigned.read.packets, strict=True)
        if a != b
    ]
    assert changed and all(not decoded for _, decoded in changed)
    assert realigned.segments == len(changed)


def test_a_capture_tshark_reads_whole_is_read_once(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[bool] = []
    real = tshark.read

    def counting(path: Path, *, timeout: float, desegment: bool = True) -> tshark.Read:
        calls.append(desegment)
        return real(path, timeout=timeout, desegment=desegment)

    monkeypatch.setattr(tshark, "read", counting)
    assert realign.read(RPING, timeout=60).segments == 0
    assert calls == [True]


@pytest.mark.parametrize(
    ("ulpdu", "wire"),
    # RFC 5044 4.1: 2-byte length, ULPDU, pad to a multiple of 4, 4-byte CRC.
    [(18, 24), (19, 28), (20, 28), (21, 28), (1442, 1448), (1290, 1296)],
)
def test_fpdu_size(ulpdu: int, wire: int) -> None:
    assert realign.fpdu_size(ulpdu) == wire


def test_a_segment_whose_fpdus_do_not_fill_it_does_not_fit() -> None:
    base = {"tcp.len": ["44"], "iwarp_mpa.ulpdulength": ["38"]}
    assert realign.fits(base)
    assert not realign.fits({**base, "tcp.len": ["48"]})
    assert not realign.fits({**base, "iwarp_mpa.ulpdulength": ["38", "18"]})
    assert not realign.fits({**base, "iwarp_mpa.rep": ["1"]})
    assert not realign.fits({"tcp.len": ["44"]})
