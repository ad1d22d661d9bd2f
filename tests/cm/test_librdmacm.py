"""The ctypes layer: struct layouts, the real libraries, and the channel over a fake boundary."""

from __future__ import annotations

import ctypes
import errno
import json
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest
from fake_rdma import FakeLib

from hil.agent.protocol import CMEvent
from hil.agent.remote import librdmacm
from hil.agent.remote.librdmacm import (
    CMChannel,
    Lib,
    RawEvent,
    RdmaError,
    RdmaUnavailable,
    cmabi,
    cook,
    verbsabi,
)

AGENT_DIR = Path(librdmacm.__file__).parents[2]  # hil/agent: remote/librdmacm/, protocol/
HOST_PYTHON = "/usr/bin/python3"

# (struct, size, {field: offset}) from rdma-core 44's headers on x86_64, read
# with offsetof()/sizeof() in C; ctypes must lay the structs out the same.
LAYOUTS = [
    (cmabi.CMEventStruct, 80, {"listen_id": 8, "event": 16, "status": 20, "conn": 24}),
    (
        cmabi.ConnParam,
        24,
        {
            "responder_resources": 9,
            "initiator_depth": 10,
            "retry_count": 12,
            "rnr_retry_count": 13,
            "srq": 14,
            "qp_num": 16,
        },
    ),
    # struct rdma_cm_id up to route.addr's src_storage and dst_storage
    (cmabi.CMIdHead, 288, {"verbs": 0, "qp": 24, "src": 32, "dst": 160}),
    (
        verbsabi.SendWR,
        128,
        {
            "sg_list": 16,
            "num_sge": 24,
            "opcode": 28,
            "send_flags": 32,
            "remote_addr": 40,
            "rkey": 48,
        },
    ),
    (verbsabi.RecvWR, 32, {"sg_list": 16, "num_sge": 24}),
    (verbsabi.SGE, 16, {"length": 8, "lkey": 12}),
    (verbsabi.WC, 48, {"status": 8, "opcode": 12, "byte_len": 20, "qp_num": 28}),
    (verbsabi.MR, 48, {"addr": 16, "length": 24, "lkey": 36, "rkey": 40}),
    (verbsabi.QPInitAttr, 64, {"cap": 32, "qp_type": 52, "sq_sig_all": 56}),
]


@pytest.mark.parametrize("struct, size, offsets", LAYOUTS, ids=[s.__name__ for s, _, _ in LAYOUTS])
def test_struct_layouts_match_rdma_core(struct: type, size: int, offsets: dict[str, int]) -> None:
    assert ctypes.sizeof(struct) == size
    for name, offset in offsets.items():
        assert getattr(struct, name).offset == offset, name


def test_inline_verbs_offsets_match_rdma_core() -> None:
    # offsetof(struct ibv_context, ops.poll_cq / ops.post_send / ops.post_recv),
    # offsetof(struct ibv_qp, qp_num), sizeof(struct ibv_qp_attr)
    assert (verbsabi.OPS_POLL_CQ, verbsabi.OPS_POST_SEND, verbsabi.OPS_POST_RECV) == (96, 208, 216)
    assert (verbsabi.QP_NUM_OFFSET, verbsabi.QP_ATTR_SIZE) == (52, 144)
    assert cmabi.RDMA_PS_TCP == 262 and verbsabi.IBV_QPS_ERR == 6


U8, U16, U32 = ctypes.c_uint8, ctypes.c_uint16, ctypes.c_uint32


class _GlobalRoute(ctypes.Structure):
    _fields_ = [
        ("dgid", ctypes.c_uint64 * 2),
        ("flow_label", U32),
        ("sgid_index", U8),
        ("hop_limit", U8),
        ("traffic_class", U8),
    ]


class _AhAttr(ctypes.Structure):
    _fields_ = [
        ("grh", _GlobalRoute),
        ("dlid", U16),
        ("sl", U8),
        ("src_path_bits", U8),
        ("static_rate", U8),
        ("is_global", U8),
        ("port_num", U8),
    ]


class _QPAttr(ctypes.Structure):
    """struct ibv_qp_attr as verbs.h declares it (qp_state .. qp_access_flags are nine
    u32s, min_rnr_timer .. alt_timeout seven u8s)."""

    _fields_ = [
        ("u32s", U32 * 9),
        ("cap", U32 * 5),
        ("ah_attr", _AhAttr),
        ("alt_ah_attr", _AhAttr),
        ("pkey_index", U16),
        ("alt_pkey_index", U16),
        ("en_sqd_async_notify", U8),
        ("sq_draining", U8),
        ("rd", U8),
        ("dest_rd", U8),
        ("u8s", U8 * 7),
        ("rate_limit", U32),
    ]


def test_the_qp_attr_depth_offsets_follow_verbs_h_layout() -> None:
    """max_rd_atomic and max_dest_rd_atomic where ctypes lays out verbs.h's fields, in a
    struct of the size rdma-core's sizeof(struct ibv_qp_attr) gives."""
    assert ctypes.sizeof(_QPAttr) == verbsabi.QP_ATTR_SIZE
    assert (_QPAttr.rd.offset, _QPAttr.dest_rd.offset) == (
        verbsabi.QP_ATTR_MAX_RD_ATOMIC,
        verbsabi.QP_ATTR_MAX_DEST_RD_ATOMIC,
    )


def test_real_libraries_load_and_type_every_function() -> None:
    lib = Lib()
    assert lib.cm.rdma_get_cm_event.argtypes and lib.verbs.ibv_reg_mr.restype


def test_real_channel_opens_or_says_why() -> None:
    """On a host with RDMA CM the channel works; without, a one-line reason (here: ENODEV)."""
    try:
        with CMChannel() as ch:
            handle = ch.create_id()
            assert ch.handles() == [handle]
            assert ch.poll_event(0.05) is None
    except RdmaUnavailable as exc:
        assert exc.op == "rdma_create_event_channel" and exc.errno is not None
        assert str(exc).startswith(f"rdma_create_event_channel: {errno.errorcode[exc.errno]} (")
        assert "no RDMA device, or the kernel lacks RDMA CM" in str(exc)
        assert librdmacm.probe() == str(exc)


def test_missing_library_is_rdma_unavailable() -> None:
    with pytest.raises(RdmaUnavailable, match="libnosuch.so.9.*install rdma-core's librdmacm1"):
        Lib(cm="libnosuch.so.9")


@pytest.fixture
def bundle(tmp_path: Path) -> Path:
    """The agent-side CM layer (the librdmacm package and the protocol it speaks) copied
    alone into a package ``cm`` laid out as the zipapp's ``hil_agent``, with the peer script."""
    if not Path(HOST_PYTHON).exists():
        pytest.skip(f"no {HOST_PYTHON} on this machine (lab hosts run the agent with it)")
    pkg = tmp_path / "cm"
    (pkg / "remote").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "remote" / "__init__.py").write_text("")
    shutil.copytree(AGENT_DIR / "remote" / "librdmacm", pkg / "remote" / "librdmacm")
    shutil.copytree(AGENT_DIR / "protocol", pkg / "protocol")
    shutil.copy(Path(__file__).parent / "cmpeer.py", tmp_path / "cmpeer.py")
    return tmp_path


def test_runs_under_host_python_with_stdlib_only(bundle: Path) -> None:
    """The librdmacm package needs only protocol/; ``python3 -I`` must import it."""
    code = (
        f"import sys; sys.path.insert(0, {str(bundle)!r}); import cm.remote.librdmacm as m; "
        "print(m.probe()); print(sorted(k for k in sys.modules if k.startswith('hil')))"
    )
    out = subprocess.run(
        [HOST_PYTHON, "-I", "-c", code], capture_output=True, text=True, timeout=30, check=True
    ).stdout.splitlines()
    assert out[1] == "[]"
    assert out[0] == str(librdmacm.probe())


def test_peer_script_reports_in_json_lines(bundle: Path) -> None:
    """The lab peer script runs here too: without RDMA it reports why, one JSON line."""
    proc = subprocess.run(
        [
            HOST_PYTHON,
            "-I",
            str(bundle / "cmpeer.py"),
            "--timeout",
            "2",
            "client",
            "127.0.0.1",
            "7471",
        ],
        check=False,
        capture_output=True,
        text=True,
        timeout=30,
    )
    lines = [json.loads(line) for line in proc.stdout.splitlines()]
    reason = librdmacm.probe()
    if reason is None:
        assert proc.returncode == 0 and any("action" in x for x in lines)
    else:
        assert (proc.returncode, lines) == (3, [{"error": reason}])


def test_sockaddr_packing() -> None:
    v4 = cmabi.sockaddr("198.18.0.1", 7471).raw
    assert len(v4) == 16 and v4[2:4] == (7471).to_bytes(2, "big")
    assert int.from_bytes(v4[:2], "little") == socket.AF_INET and v4[4:8] == bytes([198, 18, 0, 1])
    v6 = cmabi.sockaddr("::1", 1).raw
    assert len(v6) == 28 and int.from_bytes(v6[:2], "little") == socket.AF_INET6
    with pytest.raises(RdmaError, match="not a numeric IP address: 'lab-a'"):
        cmabi.sockaddr("lab-a")


@pytest.mark.parametrize(
    "address, port, text",
    [
        ("198.18.0.1", 7471, "198.18.0.1:7471"),
        ("fd00::2", 40001, "[fd00::2]:40001"),
        ("::ffff:198.18.0.1", 1, "[::ffff:198.18.0.1]:1"),
    ],
)
def test_sockaddr_text_reads_back_what_sockaddr_packs(address: str, port: int, text: str) -> None:
    raw = cmabi.sockaddr(address, port).raw
    assert cmabi.sockaddr_text(raw + bytes(128 - len(raw))) == text


def test_sockaddr_text_of_an_unspecified_family_is_empty() -> None:
    assert cmabi.sockaddr_text(bytes(128)) == ""


def _request(lib: FakeLib, ch: CMChannel, listener: int) -> tuple[int, CMEvent]:
    """A CONNECT_REQUEST through ``listener`` whose new id holds 198.18.0.2:7471 <->
    198.18.0.1:40001, as polled: the new id's pointer and the event."""
    child_ptr = lib.cm.new_id()
    lib.cm.set_route(child_ptr, ("198.18.0.2", 7471), ("198.18.0.1", 40001))
    lib.cm.push(4, child_ptr, ch._id(listener).ptr)
    ev = ch.poll_event(1.0)
    assert ev is not None
    return child_ptr, ev


def test_events_carry_their_ids_endpoints_as_librdmacm_holds_them() -> None:
    lib = FakeLib()
    with CMChannel(lib) as ch:  # type: ignore[arg-type]
        _, ev = _request(lib, ch, ch.create_id())
        assert (ev["local"], ev["remote"]) == ("198.18.0.2:7471", "198.18.0.1:40001")
        fresh = lib.cm.new_id()  # nothing resolved yet: both unspecified
        lib.cm.push(1, fresh, status=-110)
        unresolved = ch.poll_event(1.0)
        assert unresolved is not None and (unresolved["local"], unresolved["remote"]) == ("", "")


def test_an_ids_addresses_are_read_apart_from_its_events() -> None:
    """rdma_get_local_addr / rdma_get_peer_addr: the id's route.addr when asked, whatever
    its events carried (an event is a copy taken when it was read)."""
    lib = FakeLib()
    with CMChannel(lib) as ch:  # type: ignore[arg-type]
        listener = ch.create_id()
        child_ptr, ev = _request(lib, ch, listener)
        assert ev["id"] is not None
        assert ch.addresses(ev["id"]) == ("198.18.0.2:7471", "198.18.0.1:40001")
        lib.cm.set_route(child_ptr, ("198.18.0.2", 7471), ("198.18.0.1", 40002))
        assert ch.addresses(ev["id"])[1] == "198.18.0.1:40002"
        assert ev["remote"] == "198.18.0.1:40001"
        assert ch.addresses(listener) == ("", "")  # nothing bound in the fake: unspecified


def test_a_raw_read_is_the_event_before_its_dict_and_cooks_into_it() -> None:
    """read_event (a storm's read inside a timed step) keeps the event as read; cook makes
    the same dict poll_event returns."""
    lib = FakeLib()
    with CMChannel(lib) as ch:  # type: ignore[arg-type]
        listener = ch.create_id()
        events = []
        for read in (ch.read_event, ch.poll_event):
            child_ptr = lib.cm.new_id()
            lib.cm.set_route(child_ptr, ("fd00::2", 7471), ("198.18.0.1", 40001))
            lib.cm.push(4, child_ptr, ch._id(listener).ptr, 0, b"hil")
            events.append(read(1.0))
        raw, cooked = events
        assert isinstance(raw, RawEvent) and isinstance(cooked, dict) and lib.cm.acked == 2
        assert (raw.type, raw.listen_id, raw.private_data) == ("CONNECT_REQUEST", listener, b"hil")
        assert raw.id in ch.handles() and raw.host_t_us <= cooked["host_t_us"]
        assert cook(raw) == {**cooked, "id": raw.id, "host_t_us": raw.host_t_us}
        assert (cooked["local"], cooked["remote"]) == ("[fd00::2]:7471", "198.18.0.1:40001")
        gone = lib.cm.new_id()  # no id of this channel's: its memory is not read
        lib.cm.push(1, gone)
        stray = ch.read_event(1.0)
        assert stray is not None and (stray.id, stray.src, stray.dst) == (None, b"", b"")
        assert (cook(stray)["local"], cook(stray)["remote"]) == ("", "")


def test_unexpected_channel_errno_is_rdma_error_not_unavailable() -> None:
    lib = FakeLib()
    lib.cm.fail_create_channel = errno.EMFILE
    with pytest.raises(RdmaError, match="EMFILE") as info:
        CMChannel(lib)  # type: ignore[arg-type]
    assert not isinstance(info.value, RdmaUnavailable)


def test_poll_event_times_out_without_blocking() -> None:
    with CMChannel(FakeLib()) as ch:  # type: ignore[arg-type]
        assert not os.get_blocking(ch.fd)
        start = time.monotonic()
        assert ch.poll_event(0.05) is None
        assert time.monotonic() - start < 2


def test_events_are_copied_acked_and_named_by_handles() -> None:
    lib = FakeLib()
    with CMChannel(lib) as ch:  # type: ignore[arg-type]
        listener = ch.create_id()
        ch.bind(listener, "198.18.0.2", 7471)
        ch.listen(listener, 8)
        listen_ptr = ch._id(listener).ptr
        child_ptr = lib.cm.new_id()
        lib.cm.push(4, child_ptr, listen_ptr, 0, b"\xc0\xff\xee")
        before = time.monotonic_ns() // 1000
        ev = ch.poll_event(1.0)
        assert ev is not None and lib.cm.acked == 1
        assert ev["type"] == "CONNECT_REQUEST" and ev["listen_id"] == listener
        assert ev["private_data"] == "c0ffee" and ev["status"] == 0
        assert ev["id"] not in (None, listener) and ev["id"] in ch.handles()
        assert isinstance(ev["host_t_us"], int) and ev["host_t_us"] >= before
        lib.cm.push(8, child_ptr, status=-errno.ECONNRESET)
        ev2 = ch.poll_event(1.0)
        assert ev2 is not None and (ev2["type"], ev2["status"], ev2["id"]) == (
            "REJECTED",
            -104,
            ev["id"],
        )
        assert lib.cm.acked == 2


def test_listen_needs_a_positive_backlog_and_errors_name_the_call() -> None:
    lib = FakeLib()
    with CMChannel(lib) as ch:  # type: ignore[arg-type]
        h = ch.create_id()
        with pytest.raises(RdmaError, match="rdma_listen: EINVAL.*positive backlog"):
            ch.listen(h, 0)
        with pytest.raises(RdmaError, match=r"^rdma_listen: EINVAL \(Invalid argument\)$"):
            ch.listen(h, 5000)
        with pytest.raises(RdmaError, match="no cm_id with handle 99"):
            ch.disconnect(99)
        with pytest.raises(RdmaError, match="has no QP: call create_qp first"):
            ch.post_send(h, 10)
        with pytest.raises(RdmaError, match="private data longer than 255"):
            ch.reject(h, bytes(256))


def test_qp_traffic_goes_through_the_provider_ops_table() -> None:
    lib = FakeLib()
    with CMChannel(lib) as ch:  # type: ignore[arg-type]
        h = ch.create_id()
        info = ch.create_qp(h, depth=4, buf_size=4096)
        assert info["qp_num"] == 77 and info["rkey"] == 22 and info["length"] == 4096
        ch.post_recv(h, 3)
        assert lib.verbs.recvs == 3
        first = ch.post_send(h, 100)
        second = ch.post_send(h, 200, remote=(0xDEAD000, 5))
        assert lib.verbs.sent == [
            (first, verbsabi.IBV_WR_SEND, 100, 11, 0),
            (second, verbsabi.IBV_WR_RDMA_WRITE, 200, 11, 0xDEAD000),
        ]
        done = ch.poll_cq(h)
        assert [(c["wr_id"], c["byte_len"]) for c in done] == [(first, 100), (second, 200)]
        with pytest.raises(RdmaError, match="length must be 1..4096"):
            ch.post_send(h, 5000)
        ch.qp_to_error(h)
        assert lib.verbs.modified == [verbsabi.IBV_QPS_ERR]
        with pytest.raises(RdmaError, match="ibv_modify_qp: EINVAL"):
            ch.qp_to_error(h)  # the fake provider refuses the second time
        took = ch.destroy_id(h)
        assert took >= 0 and ch.handles() == []
        assert lib.verbs.released == ["mr", "cq", "pd"]


@pytest.mark.parametrize("failing", ["ibv_create_cq", "ibv_reg_mr"])
def test_a_cq_or_mr_the_provider_refuses_is_named_and_what_was_made_is_freed(
    failing: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A destroy_listen full sweep on the lab once got AttributeError('regions') here
    # instead of the provider's errno: release() ran before the attribute was set.
    lib = FakeLib()

    def refuse(*args: object) -> None:
        ctypes.set_errno(errno.ENOMEM)

    monkeypatch.setattr(lib.verbs, failing, refuse)
    with CMChannel(lib) as ch:  # type: ignore[arg-type]
        h = ch.create_id()
        with pytest.raises(RdmaError, match=f"{failing}: ENOMEM"):
            ch.create_qp(h)
    made = {"ibv_create_cq": ["pd"], "ibv_reg_mr": ["pd", "cq"]}[failing]
    assert lib.verbs.made == made
    assert lib.verbs.released == list(reversed(made))


def test_destroy_time_covers_the_qp_destroy() -> None:
    """On siw in CONN_SENT the QP's destroy is what blocks (lab): it must be in the figure."""
    lib = FakeLib()
    lib.cm.qp_destroy_s = 0.05
    with CMChannel(lib) as ch:  # type: ignore[arg-type]
        h = ch.create_id()
        ch.create_qp(h)
        assert ch.destroy_id(h) >= 50_000


def test_id_first_destroys_the_id_while_its_qp_lives_then_the_qp() -> None:
    """librdmacm's rdma_destroy_id leaves the QP: it goes after, by ibv_destroy_qp."""
    lib = FakeLib()
    with CMChannel(lib) as ch:  # type: ignore[arg-type]
        h = ch.create_id()
        ch.create_qp(h)
        ptr, qp = ch._id(h).ptr, ch._id(h).head().qp
        before = time.monotonic_ns() // 1000
        returned = ch.destroy_id_first(h)
        assert before <= returned <= time.monotonic_ns() // 1000
        assert ("rdma_destroy_id", (ptr, qp)) in lib.cm.calls  # the QP was still there
        assert lib.verbs.released == ["qp", "mr", "cq", "pd"] and ch.handles() == []


def test_connect_passes_private_data_ird_and_ord() -> None:
    lib = FakeLib()
    with CMChannel(lib) as ch:  # type: ignore[arg-type]
        h = ch.create_id()
        ch.connect(h, b"hello", ird=2, ord=5)
        name, (_, param) = lib.cm.calls[-1]
        p = param._obj
        assert name == "rdma_connect" and ctypes.string_at(p.private_data, 5) == b"hello"
        assert (p.private_data_len, p.responder_resources, p.initiator_depth) == (5, 2, 5)
        ch.accept(h, b"", ird=7, ord=0)
        name, (_, param) = lib.cm.calls[-1]
        assert name == "rdma_accept"
        assert (param._obj.responder_resources, param._obj.initiator_depth) == (7, 0)


@pytest.mark.parametrize("ird, ord", [(256, 1), (1, -1)])
def test_an_ird_or_ord_no_uint8_holds_is_refused_before_the_call(ird: int, ord: int) -> None:
    lib = FakeLib()
    with CMChannel(lib) as ch:  # type: ignore[arg-type]
        h = ch.create_id()
        with pytest.raises(RdmaError, match="must be 0..255") as got:
            ch.connect(h, b"", ird=ird, ord=ord)
        assert got.value.errno == errno.EINVAL
        assert not [c for c in lib.cm.calls if c[0] == "rdma_connect"]


def test_an_event_reports_its_responder_resources_and_initiator_depth() -> None:
    lib = FakeLib()
    with CMChannel(lib) as ch:  # type: ignore[arg-type]
        h = ch.create_id()
        lib.cm.push(9, ch._id(h).ptr, depths=(8, 3))  # ESTABLISHED
        ev = ch.poll_event(1.0)
        assert ev is not None and ev["type"] == "ESTABLISHED"
        assert (ev["responder_resources"], ev["initiator_depth"]) == (8, 3)


def test_the_qps_rdma_read_depths_are_read_with_ibv_query_qp() -> None:
    lib = FakeLib()
    with CMChannel(lib) as ch:  # type: ignore[arg-type]
        h = ch.create_id()
        ch.create_qp(h, depth=4, buf_size=4096)
        lib.verbs.rd_atomic = (4, 8)
        assert ch.rd_atomic(h) == (4, 8)
        assert lib.verbs.queried == [verbsabi.IBV_QP_MAX_QP_RD_ATOMIC | (1 << 17)]


def test_an_event_for_a_destroyed_id_names_the_id_it_was() -> None:
    """Rule 5 needs whose a late event was: a destroyed id keeps its handle for events."""
    lib = FakeLib()
    with CMChannel(lib) as ch:  # type: ignore[arg-type]
        listener = ch.create_id()
        gone = ch.create_id()
        gone_ptr, listen_ptr = ch._id(gone).ptr, ch._id(listener).ptr
        ch.destroy_id(gone)
        ch.destroy_id(listener)
        lib.cm.push(6, gone_ptr, status=-errno.EINVAL)  # CONNECT_ERROR after the destroy
        ev = ch.poll_event(1.0)
        assert ev is not None and (ev["type"], ev["id"]) == ("CONNECT_ERROR", gone)
        assert (ev["local"], ev["remote"]) == ("", "")  # freed memory is not read
        child = lib.cm.new_id()
        lib.cm.push(4, child, listen_ptr)  # a request through the destroyed listener
        ev = ch.poll_event(1.0)
        assert ev is not None and ev["listen_id"] == listener and ev["id"] in ch.handles()
        lib.cm.push(6, lib.cm.new_id())  # a pointer this channel never knew
        ev = ch.poll_event(1.0)
        assert ev is not None and ev["id"] is None
