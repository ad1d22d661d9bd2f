"""hil.wire.render: an exchange as the text the report and ``hil wire judge`` show."""

from __future__ import annotations

from pathlib import Path

from hil.wire.decode import decode
from hil.wire.model import Exchange
from hil.wire.render import exchange_text

RPING = Path(__file__).resolve().parents[1] / "data" / "wire" / "rping-siw.pcap"


def test_rping_as_text() -> None:
    text = exchange_text(decode({"guest1": RPING, "guest2": RPING}))
    lines = text.splitlines()
    assert lines[0] == "capture points: guest1, guest2"
    assert "connection 198.18.0.1:44668 > 198.18.0.2:7174 (seen by guest1, guest2)" in lines
    assert (
        "  MPA request #6: rev 2 marker 0 crc 0 reject 0 enhanced 1 IRD 1 ORD 1 "
        "private data (0 bytes) - [wire 00010001]"
    ) in lines
    assert "    #3@guest1 198.18.0.1:44668 > 198.18.0.2:7174 SYN" in lines
    assert "    #11@guest2 198.18.0.2:7174 > 198.18.0.1:44668 ACK,PSH Read Request" in lines
    # Each point's packets in capture order, the first point's first.
    assert lines.index("  at guest1:") < lines.index("  at guest2:")
    assert text.endswith("#36@guest2 198.18.0.1:44668 > 198.18.0.2:7174 ACK\n")


def test_an_empty_exchange_says_so() -> None:
    text = exchange_text(Exchange(connections=(), points=("a",), notes=("a: cut short",)))
    assert text == "capture points: a\nnote: a: cut short\nno TCP connections\n"
