"""The payload check's agent side (hil/agent/remote/cm/payload.py) over two fake QPs
joined to each other (fake_rdma.WiredVerbs): both ends run at once, as on a pair."""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import pytest
from fake_rdma import FakeLib, WiredVerbs

from hil.agent import protocol
from hil.agent.remote.cm import payload, rping
from hil.agent.remote.cm.worker import Worker
from hil.agent.remote.librdmacm import CMChannel, RdmaError, verbsabi

R = TypeVar("R")
BUFFER = 8192  # small buffers keep the fake's copies short; the MTU is given
MTU = 1500


@pytest.fixture
def pair() -> Iterator[tuple[Worker, Worker, WiredVerbs, dict[str, Any]]]:
    """Two workers, one connected QP each (ids made, receives posted as connect does)."""
    verbs = WiredVerbs(), WiredVerbs()
    verbs[0].join(verbs[1])
    workers = [Worker(CMChannel(FakeLib(v))) for v in verbs]  # type: ignore[arg-type]
    qps = []
    for w in workers:
        h = w.ch.create_id()
        qps.append(w.ch.create_qp(h, depth=16, buf_size=BUFFER))
        w.ch.post_recv(h, 16)
    yield workers[0], workers[1], verbs[1], {"a": qps[0], "b": qps[1]}
    for w in workers:
        w.close()


def at_once(run_a: Callable[[], R], run_b: Callable[[], R]) -> tuple[R, R]:
    """Both ends' runs at once, as on a pair (each waits for the other's posts)."""
    replies: dict[str, R] = {}

    def side(name: str, run: Callable[[], R]) -> None:
        replies[name] = run()

    threads = [threading.Thread(target=side, args=x) for x in (("a", run_a), ("b", run_b))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    return replies["a"], replies["b"]


def both(
    a: Worker, b: Worker, qps: dict[str, Any], **extra: Any
) -> tuple[protocol.PayloadReply, protocol.PayloadReply]:
    """Each worker's payload op on its one id (handle 1), both at once."""
    return at_once(
        lambda: a.payload(1, True, qps["b"], "127.0.0.1", seed=7, mtu=MTU, **extra),
        lambda: b.payload(1, False, qps["a"], "127.0.0.1", seed=7, mtu=MTU, **extra),
    )


def test_every_op_and_size_is_checked_on_both_ends(pair: Any) -> None:
    a, b, _, qps = pair
    for reply in both(a, b, qps):
        assert reply["error"] is None and reply["mtu"] == MTU
        assert reply["sizes"] == [1, MTU - 1, MTU + 1, BUFFER]
        assert [(c["op"], c["size"]) for c in reply["checks"]] == [
            (op, size) for op in ("send", "write", "read") for size in reply["sizes"]
        ]
        assert all(c["ok"] and c["offset"] == -1 for c in reply["checks"])


def test_a_flipped_byte_is_reported_with_its_op_size_offset_and_values(pair: Any) -> None:
    """b's provider inverts byte 1500 of every transfer it makes: b's SENDs and WRITEs
    into a's buffer, and b's READs of a's into its own."""
    a, b, b_verbs, qps = pair
    b_verbs.flip = MTU
    got_a, got_b = both(a, b, qps)
    bad_a = [(c["op"], c["size"]) for c in got_a["checks"] if not c["ok"]]
    assert bad_a == [("send", MTU + 1), ("send", BUFFER), ("write", MTU + 1), ("write", BUFFER)]
    assert [(c["op"], c["size"]) for c in got_b["checks"] if not c["ok"]] == [
        ("read", MTU + 1),
        ("read", BUFFER),
    ]
    bad = next(c for c in got_b["checks"] if not c["ok"])
    # Steps go op by op, size by size, a then b: b's READ of MTU + 1 is step 16 + 2 * 2 + 1.
    want = payload.pattern(7 + 21, MTU + 1)[MTU]
    assert (bad["offset"], bad["expected"], bad["got"]) == (MTU, want, want ^ 0xFF)
    assert got_a["error"] is None and got_b["error"] is None


def test_a_short_send_is_reported_at_its_end() -> None:
    assert payload.first_difference(b"abc", b"ab") == (2, ord("c"), -1)
    assert payload.first_difference(b"abc", b"abc") == (-1, -1, -1)


def test_the_pattern_never_repeats_within_a_buffer_and_depends_on_the_seed() -> None:
    p = payload.pattern(3, 1 << 16)
    assert len(p) == 1 << 16 and p != payload.pattern(4, 1 << 16)
    assert all(p[i] == (i + (i >> 8) * 31 + 3) & 0xFF for i in (0, 255, 256, 65535))
    assert all(p[:4096] != p[d : d + 4096] for d in (1, 256, 1448, 2048, 4096))
    with pytest.raises(ValueError, match="0..65536 bytes"):
        payload.pattern(0, 70000)


def test_sizes_fit_the_buffer() -> None:
    assert payload.sizes(1500, 65536) == [1, 1499, 1501, 65536]
    assert payload.sizes(65536, 65536) == [1, 65535, 65536]


def test_an_error_completion_stops_the_run_naming_what_it_waited_for(pair: Any) -> None:
    a, b, b_verbs, qps = pair
    b_verbs.wc_status = 5  # every completion of b's flushed
    got_a, got_b = both(a, b, qps, wait=0.5)
    assert got_b["error"] is not None and "IBV_WC_WR_FLUSH_ERR" in got_b["error"]
    assert got_a["error"] is not None and "no completion within 0.5s" in got_a["error"]


class ScriptedCQ:
    """QPResources' ``poll`` and ``post_recv`` over a fixed list of completions."""

    def __init__(self, wcs: list[dict[str, int]]) -> None:
        self.wcs, self.reposted = wcs, 0
        self.buf = ctypes.create_string_buffer(64)

    def poll(self, n: int) -> list[dict[str, int]]:
        got, self.wcs[:n] = self.wcs[:n], []
        return got

    def post_recv(self, count: int) -> None:
        self.reposted += count


def test_a_wait_ends_at_its_completion_and_leaves_the_flush_behind_it_to_the_next() -> None:
    # ib_send_bw's client exits as soon as it has hil's last SEND, so the receives still
    # posted on hil's control QP flush right behind that SEND's success (a fresh-clone
    # .ci/run of c51407e failed the tool peer on the flush).
    send_ok = {"wr_id": 17, "status": 0, "opcode": 0, "byte_len": 56}  # IBV_WC_SEND
    flush = {"wr_id": 12, "status": 5, "opcode": 0, "byte_len": 0}  # IBV_WC_WR_FLUSH_ERR
    qp = payload.QP(ScriptedCQ([send_ok, flush]), 0.5, 0)  # type: ignore[arg-type]
    qp.sent("hil's last SEND")
    with pytest.raises(payload.PayloadError, match=r"FLUSH_ERR \(wr 12\) during the next wait"):
        qp.received("the next wait")


def test_a_streaming_id_is_refused(pair: Any) -> None:
    a, _, _, qps = pair
    a.stream_start(1, mode="sink")
    with pytest.raises(RdmaError, match="EBUSY"):
        a.payload(1, True, qps["b"], "127.0.0.1")


def test_the_route_mtu_is_read_from_the_kernel() -> None:
    assert payload.route_mtu("127.0.0.1") >= 1280


def test_no_route_to_the_peer_is_an_error_not_a_traceback(pair: Any) -> None:
    a, _, _, qps = pair
    got = a.payload(1, True, qps["b"], "not-an-address", wait=0.1)
    assert got["error"] is not None and "no route MTU toward 'not-an-address'" in got["error"]


def reads_both(
    a: Worker, b: Worker, qps: dict[str, Any], count: int
) -> tuple[protocol.ReadsReply, protocol.ReadsReply]:
    """a READs ``count`` slices of b's buffer at once while b serves them."""
    return at_once(
        lambda: a.reads(1, True, qps["b"], count, seed=9, wait=5.0),
        lambda: b.reads(1, False, qps["a"], count, seed=9, wait=5.0),
    )


def test_concurrent_reads_each_check_their_own_slice(pair: Any) -> None:
    a, b, _, qps = pair
    reader, server = reads_both(a, b, qps, 4)
    assert reader["error"] is None and server["error"] is None
    assert (reader["count"], reader["size"]) == (4, BUFFER // 4)
    assert [c["ok"] for c in reader["checks"]] == [True] * 4 and server["checks"] == []


def test_a_bad_byte_is_named_by_its_offset_within_its_own_read(pair: Any) -> None:
    """a's provider inverts byte 1500 of every transfer it makes: of each 2048-byte READ."""
    a, b, _, qps = pair
    a.ch._lib.verbs.flip = MTU
    reader, _ = reads_both(a, b, qps, 4)
    assert [(c["ok"], c["offset"]) for c in reader["checks"]] == [(False, MTU)] * 4


def test_no_reads_is_no_handshake_and_more_than_the_send_queue_is_refused(pair: Any) -> None:
    a, b, _, qps = pair
    assert reads_both(a, b, qps, 0)[0]["checks"] == []
    with pytest.raises(RdmaError, match="count must be 0..16"):
        a.reads(1, True, qps["b"], 17)


def test_a_qp_moved_to_err_flushes_each_posted_receive_once(pair: Any) -> None:
    a, b, b_verbs, qps = pair
    both(a, b, qps)  # receives are reposted one for one: 16 still posted after
    b.qp_err(1)
    got = b.flushed(1, wait=1.0)
    assert got["error"] is None and len(got["posted"]) == 16
    assert [c["wr_id"] for c in got["completions"]] == got["posted"]
    assert {verbsabi.wc_status_name(c["status"]) for c in got["completions"]} == {
        "IBV_WC_WR_FLUSH_ERR"
    }


def test_a_drain_keeps_a_double_completion(pair: Any) -> None:
    _, b, b_verbs, _ = pair
    b_verbs.flush_twice = True
    b.qp_err(1)
    got = b.flushed(1, wait=1.0)
    wr_ids = [c["wr_id"] for c in got["completions"]]
    assert got["error"] is None and wr_ids == [got["posted"][0], *got["posted"]]


def test_a_request_never_completed_stops_the_drain_at_its_wait(pair: Any) -> None:
    _, b, _, _ = pair  # not moved to ERR: nothing flushed
    got = b.flushed(1, wait=0.1)
    assert got["completions"] == [] and len(got["posted"]) == 16
    assert got["error"] == "no completion within 0.1s for every posted work request"


def test_a_streaming_id_is_not_drained(pair: Any) -> None:
    a, _, _, _ = pair
    a.stream_start(1, mode="sink")
    with pytest.raises(RdmaError, match="EBUSY"):
        a.flushed(1)


def test_the_sends_before_a_close_arrive_whole_and_in_order(pair: Any) -> None:
    a, b, _, _ = pair
    sent = a.last_sends(1, 4, seed=3)
    assert sent["error"] is None and sent["lengths"] == [1024, 768, 512, 256]
    got = payload.last_receives(b.ch.resources(1), {"id": 1, "count": 4, "seed": 3}, lambda: 77)
    assert got["error"] is None and got["event_us"] == 77 and got["seen_us"] > 77
    assert [(c["status"], c["byte_len"]) for c in got["completions"]] == [
        (0, n) for n in sent["lengths"]
    ]
    assert all(c["poll_us"] <= got["seen_us"] for c in got["completions"])
    assert [c["ok"] for c in got["checks"]] == [True] * 4


def test_a_byte_no_later_send_overwrote_is_checked(pair: Any) -> None:
    a, b, _, _ = pair
    a.last_sends(1, 4, seed=3)
    res = b.ch.resources(1)
    res.buf[600] = res.buf[600][0] ^ 0xFF  # SEND 2 (768 bytes) owns bytes 512..767
    got = payload.last_receives(res, {"id": 1, "count": 4, "seed": 3}, lambda: 77)
    bad = [(c["size"], c["offset"]) for c in got["checks"] if not c["ok"]]
    assert bad == [(768, 600)]


def test_a_drain_with_no_disconnected_stops_at_its_wait(pair: Any) -> None:
    a, b, _, _ = pair
    a.last_sends(1, 2)
    got = b.last_receives(1, 2, wait=0.1)
    assert len(got["completions"]) == 2 and got["seen_us"] == 0
    assert got["error"] == "within 0.1s: 2 of 2 SENDs, DISCONNECTED not seen"


def test_a_send_count_past_the_limit_is_refused(pair: Any) -> None:
    a, _, _, _ = pair
    with pytest.raises(RdmaError, match="count must be 1..8"):
        a.last_sends(1, 9)


def test_received_gives_the_next_receive_and_its_bytes_and_reposts_one(pair: Any) -> None:
    a, b, _, _ = pair
    sent = a.last_sends(1, 1, seed=3)  # one SEND of 256 bytes, the pattern of seed 3
    got = b.received(1, wait=1.0)
    assert got["error"] is None and got["status"] == 0
    assert got["byte_len"] == sent["lengths"][0] == 256
    res = b.ch.resources(1)
    assert got["data"] == bytes(res.buf[:256]).hex()
    assert len(res.outstanding) == 16  # the receive it took is posted again


def test_received_checks_the_whole_message_against_the_pattern_when_given_its_size(
    pair: Any,
) -> None:
    a, b, _, _ = pair
    a.last_sends(1, 1, seed=3)  # one SEND of 256 bytes, the pattern of seed 3
    got = b.received(1, wait=1.0, size=256, seed=3)
    assert got["checks"] == [
        {"op": "send", "size": 256, "ok": True, "offset": -1, "expected": -1, "got": -1}
    ]
    a.last_sends(1, 1, seed=3)
    wrong = b.received(1, wait=1.0, size=300, seed=3)["checks"][0]  # 44 bytes never came
    assert (wrong["ok"], wrong["offset"], wrong["got"]) == (False, 256, -1)
    a.last_sends(1, 1, seed=3)
    assert b.received(1, wait=1.0)["checks"] == []  # no size: nothing to check against


def test_received_with_nothing_sent_says_so_at_its_wait(pair: Any) -> None:
    _, b, _, _ = pair
    got = b.received(1, wait=0.1)
    assert got["status"] == -1 and got["byte_len"] == 0 and got["data"] == ""
    assert got["error"] == "no receive completion in time"


def test_a_streaming_id_is_not_received_from(pair: Any) -> None:
    a, _, _, _ = pair
    a.stream_start(1, mode="sink")
    with pytest.raises(RdmaError, match="EBUSY"):
        a.received(1)


def test_messages_serve_ucmatose_both_ways_each_receive_kept_in_order(pair: Any) -> None:
    """One end as ucmatose's server (its SENDs first), the other as its client."""
    a, b, _, _ = pair
    got_a, got_b = at_once(
        lambda: a.messages(1, 10, 100, send_first=True, wait=2.0),
        lambda: b.messages(1, 10, 100, send_first=False, wait=2.0),
    )
    for got in (got_a, got_b):
        assert got["error"] is None and got["sent"] == 10
        assert got["received"] == [100] * 10


def test_messages_the_peer_never_sends_stop_at_their_wait_naming_the_receive(pair: Any) -> None:
    _, b, _, _ = pair
    got = b.messages(1, 2, 100, send_first=False, wait=0.1)
    assert got["received"] == [] and got["sent"] == 0
    assert got["error"] == "no completion within 0.1s waiting for receive 1 of 2"


def test_messages_past_either_queue_or_the_buffer_are_refused(pair: Any) -> None:
    a, _, _, _ = pair
    with pytest.raises(RdmaError, match="count must be 1..16"):
        a.messages(1, 17, 100, send_first=True)
    with pytest.raises(RdmaError, match=f"size must be 1..{BUFFER}"):
        a.messages(1, 1, BUFFER + 1, send_first=True)


def test_rping_client_and_server_each_check_every_ping(pair: Any) -> None:
    """Both ends play rping's protocol: the server reads each ping's text from the
    client's advertised start buffer and writes it back into its sink."""
    a, b, _, _ = pair
    client, server = at_once(
        lambda: a.rping(1, "client", 3, size=100, wait=2.0),
        lambda: b.rping(1, "server", 3, wait=2.0),
    )
    for got in (client, server):
        assert got["error"] is None
        assert [(c["ping"], c["size"], c["ok"]) for c in got["checks"]] == [
            (k, 100, True) for k in range(3)
        ]
    assert server["text"][1] == rping.text(1, 100)[:-1].decode()
    assert server["text"][1].startswith("rdma-ping-1: BCDEF")


def test_rping_text_is_rpings_own() -> None:
    # rping.c rping_test_client: the format, letters from 'A' + ping wrapping past 'z'.
    assert rping.text(0, 20) == b"rdma-ping-0: ABCDEF\0"
    assert rping.text(57, 18) == b"rdma-ping-57: zAB\0"
    assert rping.text(58, 17) == b"rdma-ping-58: AB\0"


def test_an_rping_server_that_reads_a_wrong_byte_names_it(pair: Any) -> None:
    a, b, b_verbs, _ = pair
    b_verbs.flip = 50  # b's provider inverts byte 50 of its READ (and of its WRITE back)
    client, server = at_once(
        lambda: a.rping(1, "client", 1, size=100, wait=2.0),
        lambda: b.rping(1, "server", 1, wait=2.0),
    )
    assert server["checks"] == [{"ping": 0, "size": 100, "ok": False, "offset": 50}]
    assert client["checks"][0]["ok"]  # the WRITE inverted it back: only the read shows it


def test_an_rping_advertisement_of_another_length_is_bogus_to_rping(pair: Any) -> None:
    a, b, _, _ = pair
    a.last_sends(1, 1)  # one 256-byte SEND where rping's 16-byte advertisement belongs
    got = b.rping(1, "server", 1, wait=1.0)
    assert got["error"] == "ping 0: the start advertisement: a receive of 256 bytes, not rping's 16"
    with pytest.raises(RdmaError, match="size must be 1.."):
        a.rping(1, "client", 1, size=BUFFER)
