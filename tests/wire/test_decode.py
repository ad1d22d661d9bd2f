"""hil.wire.decode on real captures: siw's rping, and loopback traffic recorded here.

tests/data/wire/rping-siw.pcap is rping between the virtual lab's siw guests
(README.md there).  The loopback captures are made by each test with a real
tcpdump on lo (root): a connect with no listener, and tiny MPA exchanges
(mpa_peer.py) for what siw does not do on demand.
"""

from __future__ import annotations

import socket
from pathlib import Path

import loopback
import mpa_peer
import pytest

from hil.wire.decode import decode
from hil.wire.model import Connection, Exchange

RPING = Path(__file__).resolve().parents[1] / "data" / "wire" / "rping-siw.pcap"
ACTIVE, PASSIVE = ("198.18.0.1", 44668), ("198.18.0.2", 7174)


@pytest.fixture(scope="module")
def rping() -> Exchange:
    return decode({"guest1": RPING})


def only(exchange: Exchange) -> Connection:
    assert len(exchange.connections) == 1, [c.name for c in exchange.connections]
    return exchange.connections[0]


def test_rping_is_one_connection_opened_by_the_client(rping: Exchange) -> None:
    conn = only(rping)
    assert (conn.active, conn.passive) == (ACTIVE, PASSIVE)
    assert conn.name == "198.18.0.1:44668 > 198.18.0.2:7174"
    assert rping.points == ("guest1",) and conn.points == ("guest1",)
    # The two ARP frames are not TCP: left out.
    assert [p.frame for p in conn.packets] == list(range(3, 37))
    syn = conn.packets[0]
    assert syn.flags == {"SYN"} and syn.src == ACTIVE and syn.seq == 2750042037
    assert syn.wall_us == 1796094113963786  # frame.time_epoch 1796094113.963786000
    assert rping.between("198.18.0.2", "198.18.0.1") == (conn,)


def test_a_syns_mss_option_is_read_and_other_segments_have_none(rping: Exchange) -> None:
    """The lab's 1500-byte link: MSS 1460 each way (RFC 9293 section 3.7.1, MTU - 40)."""
    syn, syn_ack, *rest = only(rping).packets
    assert (syn.mss, syn_ack.mss) == (1460, 1460) and "SYN" in syn_ack.flags
    assert {p.mss for p in rest} == {None}


def test_rping_mpa_request_and_reply_are_enhanced_revision_2(rping: Exchange) -> None:
    conn = only(rping)
    request, reply = conn.mpa("request"), conn.mpa("reply")
    assert request is not None and reply is not None
    assert (request.frame, request.src, request.length) == (6, ACTIVE, 24)
    assert (reply.frame, reply.src) == (8, PASSIVE)
    for frame in (request.mpa, reply.mpa):
        assert frame is not None
        assert (frame.revision, frame.enhanced, frame.marker, frame.crc, frame.reject) == (
            2,
            True,
            False,
            False,
            False,
        )
        # rping passes no private data: the wire's 4 bytes are the IRD/ORD words.
        assert (frame.ird, frame.ord) == (1, 1)
        assert (frame.wire_private_data, frame.private_data) == ("00010001", "")


def test_rping_closes_with_a_fin_from_each_side_and_no_rst(rping: Exchange) -> None:
    conn = only(rping)
    fins = conn.with_flag("FIN")
    assert [conn.role(p) for p in fins] == ["active", "passive"]
    assert [p.frame for p in fins] == [34, 35]
    assert conn.with_flag("RST") == () and conn.terminates() == ()
    assert conn.retransmissions() == ()


def test_rping_rdmap_messages_by_opcode(rping: Exchange) -> None:
    conn = only(rping)
    by_frame = {p.frame: p.rdmap for p in conn.packets if p.rdmap}
    assert by_frame[10] == ("Send",)
    assert by_frame[11] == ("Read Request",)
    assert by_frame[12] == ("Read Response",)
    assert by_frame[15] == ("Write",)
    sent = [op for p in conn.packets for op in p.rdmap]
    assert sent.count("Send") == 12 and sent.count("Write") == 3
    # The MPA frames and bare ACKs carry no FPDU.
    assert conn.packets[3].rdmap == () and conn.packets[2].rdmap == ()


def test_one_connection_seen_by_two_points_is_one_connection(rping: Exchange) -> None:
    both = decode({"guest1": RPING, "guest2": RPING})
    conn = only(both)
    assert both.points == conn.points == ("guest1", "guest2")
    assert len(conn.seen_by("guest2")) == len(conn.seen_by("guest1")) == 34
    assert conn.mpa("reply", "guest2") is not None


@pytest.fixture
def lo(tmp_path: Path) -> Path:
    reason = loopback.unavailable()
    if reason:
        pytest.skip(reason)
    return tmp_path / "lo.pcap"


@pytest.mark.parametrize("host", ["127.0.0.1", "::1"])
def test_a_connect_with_no_listener_is_a_syn_answered_by_rst(lo: Path, host: str) -> None:
    port = loopback.free_port(host)

    def connect() -> None:
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection((host, port), timeout=5).close()

    conn = only(decode({"lo": loopback.record(lo, port, connect)}))
    assert conn.passive == (host, port)
    syn, rst = conn.packets
    assert syn.flags == {"SYN"} and conn.role(syn) == "active"
    assert "RST" in rst.flags and conn.role(rst) == "passive"
    assert syn.mpa is None and rst.rdmap == ()


def test_mpa_revision_1_with_crc_and_a_segment_with_a_send_and_a_terminate(lo: Path) -> None:
    port = loopback.free_port("127.0.0.1")
    request = mpa_peer.frame(mpa_peer.KEY_REQ, mpa_peer.CRC, 1, b"hello")
    # IRD 1 with the peer-to-peer bit, ORD 2 with the read-RTR bit: control bits are not counts.
    reply_pdata = bytes.fromhex("80014002") + b"abc"
    reply = mpa_peer.frame(mpa_peer.KEY_REP, mpa_peer.CRC | mpa_peer.ENHANCED, 2, reply_pdata)
    # Two FPDUs in one segment: a Send (6 bytes, padded), then a TERMINATE with the
    # DDP layer (1), tagged buffer error (1), code 0: invalid STag.
    fpdu = mpa_peer.send_fpdu(b"abcdef") + mpa_peer.terminate_fpdu(0x11, 0x00)

    def talk() -> None:
        mpa_peer.exchange("127.0.0.1", port, request, reply, fpdu)

    conn = only(decode({"lo": loopback.record(lo, port, talk)}))
    req, rep = conn.mpa("request"), conn.mpa("reply")
    assert req is not None and req.mpa is not None and rep is not None and rep.mpa is not None
    assert (req.mpa.revision, req.mpa.crc, req.mpa.enhanced) == (1, True, False)
    assert (req.mpa.private_data, req.mpa.wire_private_data) == ("68656c6c6f",) * 2
    assert (req.mpa.ird, req.mpa.ord) == (None, None)
    assert (rep.mpa.revision, rep.mpa.enhanced, rep.mpa.ird, rep.mpa.ord) == (2, True, 1, 2)
    assert (rep.mpa.private_data, rep.mpa.wire_private_data) == ("616263", "80014002616263")
    (term,) = conn.terminates()
    assert conn.role(term) == "active" and term.rdmap == ("Send", "Terminate")
    assert term.terminate is not None
    t = term.terminate
    assert (t.layer, t.error_type, t.error_code) == ("DDP", 1, 0)
    assert t.text == "DDP: Tagged Buffer Error: Invalid STag"
    assert [conn.role(p) for p in conn.with_flag("FIN")] == ["active", "passive"]


def test_a_rejecting_reply_and_two_connections_in_one_capture(lo: Path) -> None:
    port = loopback.free_port("127.0.0.1")
    request = mpa_peer.frame(mpa_peer.KEY_REQ, mpa_peer.ENHANCED, 2, bytes.fromhex("00040004"))
    reject = mpa_peer.frame(
        mpa_peer.KEY_REP, mpa_peer.REJECT | mpa_peer.ENHANCED, 2, bytes.fromhex("00000000") + b"no"
    )
    accept = mpa_peer.frame(mpa_peer.KEY_REP, mpa_peer.ENHANCED, 2, bytes.fromhex("00040004"))

    def twice() -> None:
        mpa_peer.exchange("127.0.0.1", port, request, reject)
        mpa_peer.exchange("127.0.0.1", port, request, accept)

    exchange = decode({"lo": loopback.record(lo, port, twice)})
    first, second = exchange.connections
    assert first.active != second.active and first.passive == second.passive
    rejected, accepted = first.mpa("reply"), second.mpa("reply")
    assert rejected is not None and rejected.mpa is not None and rejected.mpa.reject
    assert rejected.mpa.private_data == "6e6f" and (rejected.mpa.ird, rejected.mpa.ord) == (0, 0)
    assert accepted is not None and accepted.mpa is not None and not accepted.mpa.reject
    assert (accepted.mpa.ird, accepted.mpa.ord) == (4, 4)


@pytest.mark.parametrize(
    "layer_etype, code, expected",
    [
        (0x02, 0x06, ("RDMAP", 2, 6, "RDMA: Remote Operation Error: Unexpected OpCode")),
        (
            0x12,
            0x05,
            ("DDP", 2, 5, "DDP: Untagged Buffer Error: DDP Message too long for available buffer"),
        ),
        (0x20, 0x02, ("LLP", 0, 2, "LLP: MPA Error: MPA CRC Error")),
    ],
    ids=["rdmap", "ddp-untagged", "llp"],
)
def test_terminate_of_each_layer_with_tsharks_words(
    lo: Path, layer_etype: int, code: int, expected: tuple[str, int, int, str]
) -> None:
    port = loopback.free_port("127.0.0.1")
    v2 = bytes.fromhex("00010001")
    request = mpa_peer.frame(mpa_peer.KEY_REQ, mpa_peer.ENHANCED, 2, v2)
    reply = mpa_peer.frame(mpa_peer.KEY_REP, mpa_peer.ENHANCED, 2, v2)

    def talk() -> None:
        mpa_peer.exchange(
            "127.0.0.1", port, request, reply, mpa_peer.terminate_fpdu(layer_etype, code)
        )

    (term,) = only(decode({"lo": loopback.record(lo, port, talk)})).terminates()
    t = term.terminate
    assert t is not None and (t.layer, t.error_type, t.error_code, t.text) == expected


def _tcp_headers(pcap: bytearray) -> list[int]:
    """Where each IPv4 TCP segment's header starts in an Ethernet pcap."""
    found, at = [], 24  # the global header, then 16-byte record headers
    while at < len(pcap):
        length = int.from_bytes(pcap[at + 8 : at + 12], "little")
        frame = at + 16
        ip = frame + 14
        if pcap[frame + 12 : frame + 14] == b"\x08\x00" and pcap[ip + 9] == 6:
            found.append(ip + (pcap[ip] & 0x0F) * 4)
        at = frame + length
    return found


def _bogus_tcp_header(pcap: bytes) -> bytes:
    """``pcap`` with the first IPv4 TCP segment's data offset set to 60 bytes, past its end."""
    data = bytearray(pcap)
    data[_tcp_headers(data)[0] + 12] = 0xF0
    return bytes(data)


def test_a_packet_with_a_corrupt_tcp_header_is_left_out_with_a_note(
    rping: Exchange, tmp_path: Path
) -> None:
    corrupt = tmp_path / "corrupt.pcap"
    corrupt.write_bytes(_bogus_tcp_header(RPING.read_bytes()))
    got = decode({"guest1": corrupt})
    assert len(only(got).packets) == len(only(rping).packets) - 1
    assert any("1 packet(s) whose TCP header" in n for n in got.notes), got.notes


def test_a_segment_corrupted_on_the_path_is_left_out_by_its_checksum(
    rping: Exchange, tmp_path: Path
) -> None:
    """A flipped bit that makes an ACK an RST: the receiver's TCP drops it (bad checksum),
    so the exchange must not show an RST (the impairment suite's corrupt test)."""
    data = bytearray(RPING.read_bytes())
    data[_tcp_headers(data)[4] + 13] |= 0x04  # the ACK of the MPA request (no data) an RST
    corrupt = tmp_path / "rst.pcap"
    corrupt.write_bytes(bytes(data))
    got = decode({"guest1": corrupt})
    assert not any("RST" in p.flags for p in only(got).packets)
    assert len(only(got).packets) == len(only(rping).packets) - 1
    assert any("1 segment(s) (0 with data) with a bad TCP checksum" in n for n in got.notes)


def test_a_corrupted_request_is_left_out_and_its_retransmission_decoded(
    rping: Exchange, tmp_path: Path
) -> None:
    """netem flipped the ORD of siw's MPA request (a CI run judged ORD 129): tshark's MPA
    state took that copy and did not dissect the retransmission, so the broken copy must
    go and the retransmission be the request read; frame numbers stay the file's."""
    data = bytearray(RPING.read_bytes())
    start, end = _records(data)[_REQUEST]
    broken = bytearray(data[start:end])
    broken[_payload_at(broken) + 23] ^= 0x80  # the ORD word's low byte: 1 -> 129
    corrupt = tmp_path / "request-retransmitted.pcap"
    corrupt.write_bytes(bytes(data[:start] + broken + data[start:]))
    got = decode({"guest1": corrupt})
    request = only(got).mpa("request")
    assert request is not None and request.mpa is not None
    assert (request.mpa.ird, request.mpa.ord) == (1, 1)
    assert request.frame == _REQUEST + 2  # the retransmission, behind the broken copy
    assert [p.frame for p in only(got).packets] == [
        p.frame + (p.frame > _REQUEST) for p in only(rping).packets
    ]
    assert any("1 segment(s) (1 with data) with a bad TCP checksum" in n for n in got.notes)


def test_a_corrupted_data_segment_never_retransmitted_is_missing_not_misread(
    rping: Exchange, tmp_path: Path
) -> None:
    data = bytearray(RPING.read_bytes())
    request = _tcp_headers(data)[3]  # the MPA request's segment
    data[request + 32 + 17] ^= 0x01  # its MPA revision (a 32-byte TCP header: timestamps)
    corrupt = tmp_path / "request.pcap"
    corrupt.write_bytes(bytes(data))
    got = decode({"guest1": corrupt})
    assert len(only(got).packets) == len(only(rping).packets) - 1
    assert only(got).mpa("request") is None


# rping-siw.pcap's record (0-based) holding siw's MPA request, frame 6.
_REQUEST = 5


def _records(pcap: bytearray) -> list[tuple[int, int]]:
    """Each record's (start, end) in a pcap: 16-byte header and its frame."""
    found, at = [], 24
    while at < len(pcap):
        end = at + 16 + int.from_bytes(pcap[at + 8 : at + 12], "little")
        found.append((at, end))
        at = end
    return found


def _payload_at(record: bytearray) -> int:
    """Where the TCP payload of an IPv4 Ethernet pcap record starts."""
    ip = 16 + 14
    tcp = ip + (record[ip] & 0x0F) * 4
    return tcp + (record[tcp + 12] >> 4) * 4
