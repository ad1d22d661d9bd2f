"""A fake librdmacm/libibverbs boundary for unit tests of hil.agent.remote.librdmacm.

The event channel's fd is a real pipe, so polling and timeouts are real;
cm_ids, QPs and CQs are real memory laid out like rdma-core's structs, and
the provider ops table holds Python callbacks at rdma-core's offsets, so the
layer's pointer arithmetic is exercised for real.
"""

from __future__ import annotations

import ctypes
import errno
import os
import time
from ctypes import c_int, c_void_p
from typing import Any

from hil.agent.remote.librdmacm import verbsabi
from hil.agent.remote.librdmacm.cmabi import CMEventStruct, CMIdHead, sockaddr

OPS_TABLE_SIZE = 232  # sizeof(struct ibv_context) is larger; we use the first slots only


class FakeCM:
    """librdmacm: ids are blocks of memory; events are queued by the test."""

    def __init__(self, context: int) -> None:
        self.rfd, self.wfd = os.pipe()
        self._chan = c_int(self.rfd)
        self._keep: list[Any] = []
        self.context = context
        self.queue: list[CMEventStruct] = []
        self.acked = 0
        self.calls: list[tuple[str, tuple[Any, ...]]] = []
        self.fail_create_channel = 0
        self.qp_destroy_s = 0.0
        self.qp_pds: list[int] = []  # the PD each rdma_create_qp was given
        self.qp = ctypes.create_string_buffer(64)  # struct ibv_qp; qp_num at 52
        c_void_p.from_buffer(self.qp).value = context
        ctypes.c_uint32.from_buffer(self.qp, verbsabi.QP_NUM_OFFSET).value = 77

    def new_id(self) -> int:
        # struct rdma_cm_id's head: verbs, .., qp, route.addr's src and dst (family 0)
        block = ctypes.create_string_buffer(ctypes.sizeof(CMIdHead))
        c_void_p.from_buffer(block).value = self.context
        self._keep.append(block)
        return ctypes.addressof(block)

    def set_route(self, id_ptr: int, src: tuple[str, int], dst: tuple[str, int]) -> None:
        """Give an id the addresses librdmacm would have queried from the kernel."""
        head = CMIdHead.from_address(id_ptr)
        for field, (address, port) in (("src", src), ("dst", dst)):
            raw = sockaddr(address, port).raw
            ctypes.memmove(ctypes.addressof(head) + getattr(CMIdHead, field).offset, raw, len(raw))

    def push(
        self,
        kind: int,
        id_ptr: int,
        listen_ptr: int = 0,
        status: int = 0,
        pdata: bytes = b"",
        depths: tuple[int, int] = (0, 0),
    ) -> None:
        """Queue an event; ``depths``: its responder_resources and initiator_depth."""
        ev = CMEventStruct(id=id_ptr, listen_id=listen_ptr or None, event=kind, status=status)
        ev.conn.responder_resources, ev.conn.initiator_depth = depths
        if pdata:
            buf = ctypes.create_string_buffer(pdata, len(pdata))
            self._keep.append(buf)
            ev.conn.private_data, ev.conn.private_data_len = ctypes.addressof(buf), len(pdata)
        self.queue.append(ev)
        os.write(self.wfd, b"e")

    def rdma_create_event_channel(self) -> int | None:
        if self.fail_create_channel:
            ctypes.set_errno(self.fail_create_channel)
            return None
        return ctypes.addressof(self._chan)

    def rdma_destroy_event_channel(self, ch: int) -> None:
        os.close(self.rfd)
        os.close(self.wfd)

    def rdma_create_id(self, ch: int, out: Any, ctx: Any, ps: int) -> int:
        out._obj.value = self.new_id()
        return 0

    def rdma_get_cm_event(self, ch: int, out: Any) -> int:
        os.read(self.rfd, 1)
        out._obj.contents = self.queue.pop(0)
        return 0

    def rdma_ack_cm_event(self, ev: Any) -> int:
        self.acked += 1
        return 0

    def rdma_create_qp(self, cm_ptr: int, pd: int, attr: Any) -> int:
        self.qp_pds.append(pd)
        c_void_p.from_address(cm_ptr + 24).value = ctypes.addressof(self.qp)
        return 0

    def rdma_destroy_id(self, cm_ptr: int) -> int:
        # What the id still had: librdmacm's rdma_destroy_id leaves a QP alone.
        self.calls.append(("rdma_destroy_id", (cm_ptr, c_void_p.from_address(cm_ptr + 24).value)))
        return 0

    def rdma_destroy_qp(self, cm_ptr: int) -> None:
        time.sleep(self.qp_destroy_s)  # siw blocks here in CONN_SENT
        c_void_p.from_address(cm_ptr + 24).value = None

    def __getattr__(self, name: str) -> Any:
        def record(*args: Any) -> int:
            self.calls.append((name, args))
            if name == "rdma_listen" and args[1] > 1000:
                ctypes.set_errno(errno.EINVAL)
                return -1
            return 0

        return record


class FakeVerbs:
    """libibverbs and a provider whose ops table records posts and returns completions."""

    def __init__(self) -> None:
        self.sent: list[tuple[int, int, int, int, int]] = []
        self.recvs = 0
        self.wc_status = 0  # the status every completion carries (10: remote access error)
        self.modified: list[int] = []
        self.queried: list[int] = []  # ibv_query_qp's masks
        self.rd_atomic = (0, 0)  # what ibv_query_qp reports: max_rd_atomic, max_dest_rd_atomic
        self.cq = ctypes.create_string_buffer(64)
        self.mr = verbsabi.MR(lkey=11, rkey=22)
        self.released: list[str] = []
        self.qp_destroy_s = 0.0  # ibv_destroy_qp's block (siw's, after an id_first destroy)
        self.made: list[str] = []  # "pd", "cq", "mr" in the order they were made
        self._callbacks = (
            verbsabi.POLL_CQ(self._poll),
            verbsabi.POST_SEND(self._send),
            verbsabi.POST_RECV(self._recv),
        )
        self.context = ctypes.create_string_buffer(OPS_TABLE_SIZE)
        for offset, fn in zip(
            (verbsabi.OPS_POLL_CQ, verbsabi.OPS_POST_SEND, verbsabi.OPS_POST_RECV),
            self._callbacks,
            strict=True,
        ):
            c_void_p.from_buffer(self.context, offset).value = ctypes.cast(fn, c_void_p).value
        c_void_p.from_buffer(self.cq).value = ctypes.addressof(self.context)

    def _poll(self, cq: int, n: int, wcs: Any) -> int:
        done = self.sent[:n]
        for i, (wr_id, _, length, _, _) in enumerate(done):
            wcs[i].wr_id, wcs[i].byte_len, wcs[i].status = wr_id, length, self.wc_status
        del self.sent[: len(done)]
        return len(done)

    def _send(self, qp: int, wr: Any, bad: Any) -> int:
        w = wr.contents
        self.sent.append(
            (w.wr_id, w.opcode, w.sg_list.contents.length, w.sg_list.contents.lkey, w.remote_addr)
        )
        return 0

    def _recv(self, qp: int, wr: Any, bad: Any) -> int:
        self.recvs += 1
        return 0

    def ibv_alloc_pd(self, context: int) -> int:
        self.made.append("pd")
        return 0x1000 + len(self.made)

    def ibv_create_cq(self, *args: Any) -> int:
        self.made.append("cq")
        return ctypes.addressof(self.cq)

    def ibv_reg_mr(self, *args: Any) -> Any:
        self.made.append("mr")
        return ctypes.pointer(self.mr)

    def ibv_query_qp(self, qp: int, attr: Any, mask: int, init: Any) -> int:
        """Fill max_rd_atomic and max_dest_rd_atomic with ``rd_atomic``, as a provider."""
        self.queried.append(mask)
        attr[verbsabi.QP_ATTR_MAX_RD_ATOMIC] = self.rd_atomic[0]
        attr[verbsabi.QP_ATTR_MAX_DEST_RD_ATOMIC] = self.rd_atomic[1]
        return 0

    def ibv_modify_qp(self, qp: int, attr: Any, mask: int) -> int:
        self.modified.append(c_int.from_buffer(attr).value)
        return errno.EINVAL if len(self.modified) > 1 else 0

    def ibv_destroy_qp(self, qp: int) -> int:
        time.sleep(self.qp_destroy_s)
        self.released.append("qp")
        return 0

    def ibv_dereg_mr(self, mr: Any) -> int:
        self.released.append("mr")
        return 0

    def ibv_destroy_cq(self, cq: int) -> int:
        self.released.append("cq")
        return 0

    def ibv_dealloc_pd(self, pd: int) -> int:
        self.released.append("pd")
        return 0


class WiredVerbs(FakeVerbs):
    """A provider whose one QP is joined to another's (:meth:`join`), as an RC QP's peer.

    A SEND fills the peer's oldest posted receive; an RDMA WRITE or READ copies
    between the two buffers (one process, so addresses are real); each
    completion lands on its own CQ with its opcode.  ``flip``: an offset whose
    byte every data transfer longer than it inverts, as a broken provider would.
    Moved to ERR, the QP flushes its posted receives (``IBV_WC_WR_FLUSH_ERR``),
    the first ``flush_twice`` times over, as a broken provider would.
    """

    WC_OPCODES = {
        verbsabi.IBV_WR_SEND: 0,
        verbsabi.IBV_WR_RDMA_WRITE: 1,
        verbsabi.IBV_WR_RDMA_READ: 2,
    }

    def __init__(self) -> None:
        super().__init__()
        self.peer: WiredVerbs | None = None
        self.flip: int | None = None
        self.posted: list[tuple[int, int]] = []  # receives: wr_id, address
        # wr_id, opcode, byte_len, status (0: wc_status's, as polled)
        self.cqes: list[tuple[int, int, int, int]] = []
        self.flush_twice = False

    def join(self, peer: WiredVerbs) -> None:
        self.peer, peer.peer = peer, self

    def _recv(self, qp: int, wr: Any, bad: Any) -> int:
        self.posted.append((wr.contents.wr_id, wr.contents.sg_list.contents.addr))
        return 0

    def _send(self, qp: int, wr: Any, bad: Any) -> int:
        w, peer = wr.contents, self.peer
        assert peer is not None
        local = w.sg_list.contents.addr
        length = w.sg_list.contents.length if w.num_sge else 0
        if w.opcode == verbsabi.IBV_WR_SEND:
            wr_id, dst = peer.posted.pop(0)
            self._copy(dst, local, length)
            peer.cqes.append((wr_id, verbsabi.IBV_WC_RECV, length, 0))
        elif w.opcode == verbsabi.IBV_WR_RDMA_WRITE:
            self._copy(w.remote_addr, local, length)
        else:  # RDMA READ
            self._copy(local, w.remote_addr, length)
        self.cqes.append((w.wr_id, self.WC_OPCODES[w.opcode], length, 0))
        return 0

    def ibv_modify_qp(self, qp: int, attr: Any, mask: int) -> int:
        if c_int.from_buffer(attr).value == verbsabi.IBV_QPS_ERR:
            flushed = self.posted[:1] * self.flush_twice + self.posted
            flush = verbsabi.WC_STATUS_NAMES.index("IBV_WC_WR_FLUSH_ERR")
            self.cqes += [(w, verbsabi.IBV_WC_RECV, 0, flush) for w, _ in flushed]
            self.posted.clear()
        return super().ibv_modify_qp(qp, attr, mask)

    def _copy(self, dst: int, src: int, length: int) -> None:
        ctypes.memmove(dst, src, length)
        if self.flip is not None and length > self.flip:
            byte = ctypes.c_uint8.from_address(dst + self.flip)
            byte.value ^= 0xFF

    def _poll(self, cq: int, n: int, wcs: Any) -> int:
        done = self.cqes[:n]
        for i, (wr_id, opcode, length, status) in enumerate(done):
            wcs[i].wr_id, wcs[i].opcode, wcs[i].byte_len = wr_id, opcode, length
            wcs[i].status = status or self.wc_status  # a flush's own, or every one's
        del self.cqes[: len(done)]
        return len(done)


class FakeLib:
    """Stands in for :class:`hil.agent.remote.librdmacm.Lib`."""

    def __init__(self, verbs: FakeVerbs | None = None) -> None:
        self.verbs = verbs or FakeVerbs()
        self.cm = FakeCM(ctypes.addressof(self.verbs.context))
