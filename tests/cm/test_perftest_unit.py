"""ib_send_bw -R served by hil (hil/agent/remote/cm/perftest.py) off the lab: perftest
4.5's byte layouts against bytes built by hand from its structs, and the whole exchange
against a scripted ib_send_bw client over two fake connections joined end to end
(docs/notes/perftest-R-protocol.md); the real tool against hil is
suites/test_interop_tools.py's ib_send_bw-client."""

from __future__ import annotations

import ctypes
import struct
import threading
import time
from typing import Any

import pytest

from hil.agent import protocol
from hil.agent.remote.cm import perftest
from hil.agent.remote.librdmacm import verbsabi
from hil.cm import toolpeers

# struct pingpong_dest (perftest_resources.h) as rdma_write_keys sends it on x86-64: every
# integer htobe32/htobe64 in place, 4 bytes of padding after rkey.
PERFTEST_DEST = bytes.fromhex(
    "00000000"  # lid
    "00000001"  # out_reads
    "00000407"  # qpn 1031
    "00abcdef"  # psn
    "11223344"  # rkey
    "deadbeef"  # padding: a stack copy's garbage
    "00007f0012345678"  # vaddr
    "fe800000000000000250b6fffe123456"  # gid (raw)
    "00000000"  # srqn
    "00000000"  # gid_index
)


def test_pingpong_dest_is_perftests_56_bytes_big_endian() -> None:
    assert perftest.DEST.size == 56
    assert perftest.unpack_dest(PERFTEST_DEST) == {
        "lid": 0,
        "out_reads": 1,
        "qpn": 1031,
        "psn": 0xABCDEF,
        "rkey": 0x11223344,
        "vaddr": 0x7F0012345678,
        "gid": "fe800000000000000250b6fffe123456",
        "srqn": 0,
        "gid_index": 0,
    }
    # hil's own: LID 0, zero GID, zero padding, out_reads 1 (perftest's for SEND).
    mine = perftest.pack_dest(1031, 0xABCDEF, 0x11223344, 0x7F0012345678)
    assert mine == PERFTEST_DEST[:20] + bytes(4) + PERFTEST_DEST[24:32] + bytes(24)


def test_setup_messages_are_perftests_sizes_and_byte_orders() -> None:
    assert perftest.version_bytes() == b"6.06" + bytes(12)  # char version[16], strncpy
    assert perftest.SYS.pack(4096) == b"\x00\x00\x10\x00"  # hton_int(cycle_buffer)
    assert perftest.SYS.pack(64) == b"\x00\x00\x00\x40"  # hton_int(cache_line_size)
    assert [size for _, size in perftest.SETUP] == toolpeers.SEND_BW_CONTROL[0]
    assert len(perftest.RUN) + 1 == len(toolpeers.SEND_BW_CONTROL[1])
    assert perftest.CREDIT.pack(2) == b"\x02\x00\x00\x00"  # ctrl_buf[qp] = rcnt, x86's order


@pytest.mark.parametrize("iters", [5, 6, 7, 12, 16, 100, 1000])
def test_credits_come_where_perftests_server_writes_them(iters: int) -> None:
    # run_iter_bw_server: rx_depth min(512, iters), even; a credit when
    # (rcnt % rx_depth) % (rx_depth / 3) == 0.
    rx = min(512, iters) + min(512, iters) % 2
    want = [n for n in range(1, iters + 1) if (n % rx) % (rx // 3) == 0]
    assert [n for n in range(1, iters + 1) if perftest.credit_after(n, iters)] == want
    assert [n for n in range(1, iters + 1) if toolpeers.send_bw_credit_after(n, iters)] == want
    if iters == 5:
        assert want == [2, 4]


class FakeEnd:
    """One end of a fake RC connection, shaped as QPResources (``buf``, ``mr``, ``qp``,
    ``post``, ``post_recv``, ``poll``): a SEND fills the peer's oldest receive (of the
    peer's whole buffer; a longer one is IBV_WC_LOC_LEN_ERR there), an RDMA WRITE lands
    at its address when the rkey is the peer's."""

    def __init__(self, qp_num: int, rkey: int, size: int = 1 << 16) -> None:
        self.buf = ctypes.create_string_buffer(size)
        self.mr = ctypes.pointer(verbsabi.MR(lkey=rkey, rkey=rkey))
        self._qp = ctypes.create_string_buffer(verbsabi.QP_NUM_OFFSET + 4)
        ctypes.c_uint32.from_buffer(self._qp, verbsabi.QP_NUM_OFFSET).value = qp_num
        self.qp = ctypes.addressof(self._qp)
        self.peer: FakeEnd | None = None
        self.posted = 0
        self.cqes: list[dict[str, int]] = []
        self.lock = threading.Lock()
        self.sends: list[tuple[int, int]] = []  # what this end posted: opcode, length

    def join(self, peer: FakeEnd) -> None:
        self.peer, peer.peer = peer, self

    def post_recv(self, count: int) -> None:
        self.posted += count

    def post(self, opcode: int, length: int, offset: int, remote: Any = None) -> int:
        peer = self.peer
        assert peer is not None
        self.sends.append((opcode, length))
        data = ctypes.string_at(ctypes.addressof(self.buf) + offset, length)
        if opcode == verbsabi.IBV_WR_SEND:
            assert peer.posted, "a SEND with no receive posted: an iWARP QP would end"
            peer.posted -= 1
            status = 0 if length <= len(peer.buf) else 1
            ctypes.memmove(peer.buf, data, min(length, len(peer.buf)))
            with peer.lock:
                peer.cqes.append({"wr_id": 0, "status": status, "opcode": 128, "byte_len": length})
        else:
            addr, rkey = remote
            assert opcode == verbsabi.IBV_WR_RDMA_WRITE and rkey == peer.mr.contents.rkey
            base = ctypes.addressof(peer.buf)
            assert base <= addr and addr + length <= base + len(peer.buf)
            ctypes.memmove(addr, data, length)
        with self.lock:
            self.cqes.append({"wr_id": 0, "status": 0, "opcode": opcode, "byte_len": length})
        return 0

    def poll(self, n: int) -> list[dict[str, int]]:
        with self.lock:
            got, self.cqes[:n] = self.cqes[:n], []
        return got


class Client:
    """perftest 4.5's ib_send_bw -R client, scripted from its source (send_bw.c main):
    each control message SENT first, then the server's taken; the replies kept."""

    def __init__(self, control: FakeEnd, data: FakeEnd) -> None:
        self.control, self.data = control, data
        self.replies: list[bytes] = []

    def xchg(self, message: bytes, want: int) -> None:
        """rdma_write_data, then rdma_read_data: SEND ``message`` from the buffer's start,
        take the server's ``want`` bytes there, repost the one receive."""
        ctypes.memmove(self.control.buf, message, len(message))
        self.control.post(verbsabi.IBV_WR_SEND, len(message), 0, None)
        reply = self._take(self.control)
        assert reply["byte_len"] == want, reply
        self.replies.append(self.control.buf.raw[:want])
        self.control.post_recv(1)

    @staticmethod
    def _take(end: FakeEnd) -> dict[str, int]:
        """The next receive completion (hil's answer), within 5 s."""
        deadline = time.monotonic() + 5.0
        while time.monotonic() < deadline:
            for wc in end.poll(1):
                if wc["opcode"] & verbsabi.IBV_WC_RECV:
                    return wc
            time.sleep(0.001)
        raise AssertionError("hil's side never answered")


def client_dest(credit_slot: int) -> bytes:
    """The client's dest after ctx_alloc_credit: its credit MR's rkey and slot."""
    return struct.pack(">iiiiI4xQ16sIi", 0, 1, 77, 0x123456, 0x5151, credit_slot, bytes(16), 0, 0)


def test_a_scripted_ib_send_bw_client_gets_perftests_answers_and_credits() -> None:
    control_c, control_h = FakeEnd(11, 0x1111), FakeEnd(12, 0x2222)
    data_c, data_h = FakeEnd(21, 0x5151), FakeEnd(22, 0x6666)
    control_c.join(control_h)
    data_c.join(data_h)
    control_c.post_recv(1)  # perftest's one control receive, posted before rdma_connect
    control_h.post_recv(16)  # hil's, posted at accept
    data_h.post_recv(16)
    client = Client(control_c, data_c)
    slot = ctypes.addressof(data_c.buf) + 4096  # the client's credit_buf[0]
    mine = client_dest(slot)
    replies: dict[str, protocol.SendBwReply] = {}

    def hil_side() -> None:
        setup = protocol.SendBwParams(id=1, phase="setup", wait=5.0)
        replies["setup"] = perftest.setup(control_h, setup)  # type: ignore[arg-type]
        run = protocol.SendBwParams(id=1, phase="run", data=2, iters=5, wait=5.0)
        replies["run"] = perftest.run(control_h, data_h, run)  # type: ignore[arg-type]

    hil = threading.Thread(target=hil_side)
    hil.start()
    client.xchg(b"6.06" + bytes(12), 16)
    client.xchg(b"\x00\x00\x10\x00", 4)
    client.xchg(b"\x00\x00\x00\x40", 4)
    client.xchg(b"3\x00", 2)
    client.xchg(bytes(56), 56)
    client.xchg(bytes(56), 56)  # the data connection is made in between
    for _ in range(4):
        client.xchg(mine, 56)
    for _ in range(5):
        data_c.post(verbsabi.IBV_WR_SEND, 3000, 0, None)
    client.xchg(mine, 56)
    hil.join(10)
    setup, run = replies["setup"], replies["run"]
    assert setup["error"] is None and run["error"] is None, (setup, run)
    assert (setup["version"], setup["cycle_buffer"], setup["cache_line"], setup["mtu"]) == (
        "6.06",
        4096,
        64,
        "3",
    )
    assert [setup["control"], run["control"]] == list(toolpeers.SEND_BW_CONTROL)
    assert run["dest"] is not None and (run["dest"]["qpn"], run["dest"]["vaddr"]) == (77, slot)
    assert run["received"] == [3000] * 5 and run["credits"] == [2, 4]
    assert ctypes.c_uint32.from_address(slot).value == 4  # the last credit, as perftest reads it
    # What the client read: perftest's answers, hil's dest naming its data QP and its slot.
    assert client.replies[:5] == [
        b"6.06" + bytes(12),
        b"\x00\x00\x10\x00",
        b"\x00\x00\x00\x40",
        b"3\x00",
        bytes(56),
    ]
    assert client.replies[5] == bytes(56)
    theirs = perftest.unpack_dest(client.replies[6])
    assert (theirs["qpn"], theirs["rkey"], theirs["out_reads"], theirs["lid"]) == (22, 0x6666, 1, 0)
    assert theirs["vaddr"] == ctypes.addressof(data_h.buf) + len(data_h.buf) - 4
    assert 0 <= theirs["psn"] <= 0xFFFFFF
    assert set(client.replies[6:]) == {client.replies[6]}  # the same dest every time after
    # hil's side of the data connection: two 4-byte RDMA WRITEs, nothing else.
    assert data_h.sends == [(verbsabi.IBV_WR_RDMA_WRITE, 4)] * 2


def test_a_control_message_of_another_length_stops_the_exchange() -> None:
    """A perftest whose messages differ (another version's layout) is named, not guessed."""
    control_c, control_h = FakeEnd(11, 1), FakeEnd(12, 2)
    control_c.join(control_h)
    control_h.post_recv(16)
    control_c.post_recv(1)
    ctypes.memmove(control_c.buf, b"5.60" + bytes(28), 32)
    control_c.post(verbsabi.IBV_WR_SEND, 32, 0, None)
    params = protocol.SendBwParams(id=1, phase="setup", wait=1.0)
    got = perftest.setup(control_h, params)  # type: ignore[arg-type]
    assert got["error"] == "ib_send_bw's version: 32 bytes, not 16"
    assert got["control"] == [32] and got["version"] == ""
