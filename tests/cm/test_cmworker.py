"""The CM worker's logic (hil/agent/remote/cm/worker.py) over the fake librdmacm boundary.

The worker process itself, with real librdmacm, runs on the virtual lab
(test_sequences_lab.py); here its event log, auto-answering listeners,
waits and error answers are tested in-process.
"""

from __future__ import annotations

import io
import json
import threading
import time
from typing import Any

import pytest
from fake_rdma import FakeLib

from hil.agent import protocol
from hil.agent.remote.cm.server import Server
from hil.agent.remote.cm.worker import Worker
from hil.agent.remote.hostclock import now_us
from hil.agent.remote.librdmacm import RdmaError

ADDR_RESOLVED, ROUTE_RESOLVED, CONNECT_REQUEST, ESTABLISHED = 0, 2, 4, 9


def only_events(log: list[protocol.CMLogEntry]) -> list[protocol.CMEventEntry]:
    """``log``'s entries, each of which must be an event (no action, no read error)."""
    events = [e for e in log if e["kind"] == "event"]
    assert len(events) == len(log), log
    return events


def test_auto_accepting_listener_answers_in_the_worker(worker: tuple[Worker, FakeLib]) -> None:
    w, lib = worker
    listener = w.listen("198.18.0.2", 7471, backlog=4, auto="accept", private_data="6f6b")["id"]
    child = lib.cm.new_id()
    lib.cm.push(CONNECT_REQUEST, child, w.ch._id(listener).ptr, 0, b"hi")
    log = w.events(after=0, wait=2.0, types=["CONNECT_REQUEST"])["log"]
    requests = [e for e in log if e["kind"] == "event"]
    assert [(e["type"], e["listen_id"], e["private_data"]) for e in requests] == [
        ("CONNECT_REQUEST", listener, "6869")
    ]
    deadline = time.monotonic() + 2
    while len(w.log.entries) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    action = next(e for e in w.log.entries if e["kind"] == "action")
    assert (action["kind"], action["name"], action["id"], action["result"]) == (
        "action",
        "accept",
        requests[0]["id"],
        "ok",
    )
    # The fake id's route.addr is zeroed: its addresses are unknown ("").
    assert action["params"] == {"private_data": "6f6b", "auto": True, "local": "", "remote": ""}
    assert any(name == "rdma_accept" for name, _ in lib.cm.calls)


def test_events_wait_for_a_match_and_time_out(worker: tuple[Worker, FakeLib]) -> None:
    w, lib = worker
    h = w.ch.create_id()
    start = time.monotonic()
    assert w.events(after=0, wait=0.2, types=["ESTABLISHED"])["log"] == []
    assert 0.15 < time.monotonic() - start < 2
    lib.cm.push(ESTABLISHED, w.ch._id(h).ptr)
    got = only_events(w.events(after=0, wait=2.0, types=["ESTABLISHED"], id=h)["log"])
    assert [(e["type"], e["id"], e["seq"]) for e in got] == [("ESTABLISHED", h, 1)]
    assert w.events(after=1, wait=0.0)["log"] == []


def test_paused_worker_leaves_events_in_the_channel(worker: tuple[Worker, FakeLib]) -> None:
    w, lib = worker
    h = w.ch.create_id()
    w.pause(True)
    time.sleep(0.15)  # the poller is between polls now
    lib.cm.push(ESTABLISHED, w.ch._id(h).ptr)
    assert w.events(after=0, wait=0.3)["log"] == [] and lib.cm.acked == 0
    w.pause(False)
    assert len(w.events(after=0, wait=2.0, types=["ESTABLISHED"])["log"]) == 1


def test_a_pause_holds_an_event_that_comes_right_after_it(worker: tuple[Worker, FakeLib]) -> None:
    # The poller is in its 0.1 s read when the pause comes, and the event right after:
    # that read must not take it (a request retrieved frees rdma_ucm's backlog slot).
    w, lib = worker
    h = w.ch.create_id()
    time.sleep(0.05)  # the poller is in a read
    w.pause(True)
    lib.cm.push(ESTABLISHED, w.ch._id(h).ptr)
    assert w.events(after=0, wait=0.3)["log"] == [] and lib.cm.acked == 0
    w.pause(False)
    assert len(w.events(after=0, wait=2.0, types=["ESTABLISHED"])["log"]) == 1


def test_a_pause_returns_with_the_event_its_read_took_already_logged(
    worker: tuple[Worker, FakeLib], monkeypatch: pytest.MonkeyPatch
) -> None:
    w, lib = worker
    add = w.log.add

    def slow_add(entry: protocol.CMLogEntry) -> protocol.CMLogEntry:
        time.sleep(0.5)  # the poller took the event and is logging it
        return add(entry)

    monkeypatch.setattr(w.log, "add", slow_add)
    h = w.ch.create_id()
    lib.cm.push(ESTABLISHED, w.ch._id(h).ptr)
    time.sleep(0.15)  # read by now, being logged
    w.pause(True)
    assert [e["type"] for e in only_events(w.log.entries)] == ["ESTABLISHED"]
    w.pause(False)


def test_destroy_times_the_block_and_stops_answering(worker: tuple[Worker, FakeLib]) -> None:
    w, lib = worker
    h = w.ch.create_id()
    w.ch.create_qp(h)
    lib.cm.qp_destroy_s = 0.1
    got = w.destroy(id=h)
    assert got["us"] >= 0 and w.handles() == {"ids": []}


def test_id_first_destroy_times_the_id_alone_and_the_qp_after(
    worker: tuple[Worker, FakeLib],
) -> None:
    w, lib = worker
    h = w.ch.create_id()
    w.ch.create_qp(h)
    lib.verbs.qp_destroy_s = 0.1  # the mutant's block: in the QP's destroy, after the id's
    got = w.destroy(id=h, order="id_first")
    assert got["us"] < 100_000 <= got["qp_us"] and w.handles() == {"ids": []}
    with pytest.raises(RdmaError, match="order must be one of"):
        w.destroy(id=h, order="sideways")  # type: ignore[arg-type]


def test_destroys_reported_end_is_not_before_the_call_returned(
    worker: tuple[Worker, FakeLib], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worker's thread held up between its start stamp and the channel's call (a
    preempted guest): t_us + us still covers the whole call (docs/races.md's finding)."""
    w, lib = worker
    h = w.ch.create_id()
    w.ch.create_qp(h)
    returned: list[int] = []
    real = w.ch.destroy_id

    def held_up(handle: int) -> int:
        time.sleep(0.05)
        took = real(handle)
        returned.append(now_us())
        return took

    monkeypatch.setattr(w.ch, "destroy_id", held_up)
    got = w.destroy(id=h)
    assert got["t_us"] + got["us"] >= returned[0]


def test_a_write_answers_its_completion_error_or_not(worker: tuple[Worker, FakeLib]) -> None:
    w, lib = worker
    h = w.ch.create_id()
    w.ch.create_qp(h)
    w.ch.post_recv(h, 2)
    lib.verbs.wc_status = 10
    got = w.write(id=h, remote={"addr": 0xBEEF000, "rkey": 0x1DD}, length=16, wait=2.0)
    assert (got["wc_status"], got["wc_status_name"], got["vendor_err"]) == (
        10,
        "IBV_WC_REM_ACCESS_ERR",
        0,
    )
    assert lib.verbs.sent == [] and got["us"] >= 0  # its completion was taken
    posted = got["wr_id"]
    assert posted == 3  # after the two receives: wr_ids count across the QP


def test_a_write_without_completion_times_out_naming_the_id(
    worker: tuple[Worker, FakeLib], monkeypatch: pytest.MonkeyPatch
) -> None:
    w, _ = worker
    h = w.ch.create_id()
    w.ch.create_qp(h)
    monkeypatch.setattr(w.ch, "poll_cq", lambda handle, max_entries=16: [])
    with pytest.raises(RdmaError, match=f"ETIMEDOUT.*cm_id {h}: no completion within 0.2s"):
        w.write(id=h, remote={"addr": 1, "rkey": 2}, wait=0.2)


def test_server_answers_errors_with_errno_and_timing(worker: tuple[Worker, FakeLib]) -> None:
    w, _ = worker
    out = io.BytesIO()
    server = Server(w, out)
    server._run(1, "disconnect", {"id": 42})
    server._run(2, "listen", {"address": "198.18.0.2", "port": 1, "auto": "maybe"})
    server._run(3, "nope", {})
    server._run(4, "listen", {"adress": "x"})
    answers = [json.loads(line) for line in out.getvalue().splitlines()]
    first = answers[0]["error"]
    assert (first["type"], first["errno_name"]) == ("rdma", "EBADF")
    assert "no cm_id with handle 42" in first["message"]
    assert answers[1]["error"]["errno_name"] == "EINVAL"
    assert answers[2]["error"]["type"] == "unknown_method"
    assert answers[3]["error"]["type"] == "bad_params"


def test_every_operation_answers_what_the_protocol_declares(worker: tuple[Worker, FakeLib]) -> None:
    """Each op through the worker's JSON server; each answer decodes strictly as
    hil.agent.protocol.CM_OPS declares it (the controller decodes the same way)."""
    w, lib = worker
    out = io.BytesIO()
    server = Server(w, out)
    answered: dict[protocol.CMOpName, dict[str, Any]] = {}

    def op(name: protocol.CMOpName, **params: Any) -> dict[str, Any]:
        server._run(len(answered) + 1, name, params)
        answer = json.loads(out.getvalue().splitlines()[-1])
        assert "result" in answer, answer
        protocol.CM_OPS[name].check_params(params)
        answered[name] = protocol.CM_OPS[name].decode(answer["result"], strict=True)
        return answered[name]

    def resolve_when_asked() -> None:  # the fake's librdmacm resolves nothing by itself
        for call, event in (
            ("rdma_resolve_addr", ADDR_RESOLVED),
            ("rdma_resolve_route", ROUTE_RESOLVED),
        ):
            while not any(name == call for name, _ in lib.cm.calls):
                time.sleep(0.01)
            lib.cm.push(event, next(args[0] for name, args in lib.cm.calls if name == call))

    auto = op("listen", address="198.18.0.2", port=7471, auto="accept", private_data="6f6b")
    lib.cm.push(CONNECT_REQUEST, lib.cm.new_id(), w.ch._id(auto["id"]).ptr, 0, b"hi")
    listener = op("listen", address="198.18.0.2", port=7472)["id"]
    for _ in range(2):
        lib.cm.push(CONNECT_REQUEST, lib.cm.new_id(), w.ch._id(listener).ptr)
    got = op("events", after=0, wait=2.0, types=["CONNECT_REQUEST"], id=None)["log"]
    deadline = time.monotonic() + 2
    while len(w.log.entries) < 4 and time.monotonic() < deadline:  # the auto accept's entry
        time.sleep(0.01)
    mine = [e["id"] for e in w.log.entries if e["kind"] == "event" and e["listen_id"] == listener]
    assert len(got) >= 1 and len(mine) == 2
    assert op("accept", id=mine[0], private_data="6f6b")["qp"]["rkey"] == 22
    op("reject", id=mine[1])
    op("stream_start", id=mine[0], mode="send", size=64, depth=2)
    op("stream_stats", id=mine[0])
    assert op("stream_stop", id=mine[0])["error"] is None
    assert op("write", id=mine[0], remote={"addr": 4, "rkey": 5}, length=8)["wc_status"] == 0
    peer = {"qp_num": 78, "addr": 4, "rkey": 5, "length": 65536}
    checked = op("payload", id=mine[0], first=True, peer=peer, peer_address="198.18.0.1", wait=0.1)
    assert "no completion within 0.1s" in str(checked["error"])  # no peer sends its MTU here
    read = op("reads", id=mine[0], reader=True, peer=peer, count=2, wait=0.1)
    assert "no completion within 0.1s" in str(read["error"])  # no peer says it is ready
    assert op("last_sends", id=mine[0], count=2, wait=0.1)["lengths"] == [512, 256]
    last = op("last_receives", id=mine[0], count=2, wait=0.1)
    assert "DISCONNECTED not seen" in str(last["error"])  # nothing closed here
    lib.verbs.rd_atomic = (2, 4)
    assert op("query_qp", id=mine[0])["max_dest_rd_atomic"] == 4
    region = op("reg_mr", id=mine[0], length=64, access=["local_write", "remote_read"])
    assert (region["stag"], region["length"], region["access"]) == (
        22,
        64,
        ["local_write", "remote_read"],
    )
    assert region["base"] and op("reg_mr", id=mine[0], length=8)["access"] == list(
        protocol.REGION_ACCESS
    )
    for bad in ({"length": 0}, {"length": 8, "access": ["remote_atomic"]}):
        server._run(99, "reg_mr", {"id": mine[0], **bad})
        refused = json.loads(out.getvalue().splitlines()[-1])["error"]
        assert refused["errno_name"] == "EINVAL", refused
    assert op("received", id=mine[0], wait=0.1)["status"] == -1  # nothing sent: none came
    exchanged = op("messages", id=mine[0], count=1, size=8, send_first=False, wait=0.1)
    assert "no completion within 0.1s" in str(exchanged["error"])  # no peer sends here
    pinged = op("rping", id=mine[0], role="server", count=1, size=8, wait=0.1)
    assert "the start advertisement" in str(pinged["error"])  # no rping client here
    served = op("send_bw", id=mine[0], phase="setup", wait=0.1)
    assert "ib_send_bw's version" in str(served["error"])  # no ib_send_bw client here
    for wrong in ({"phase": "run", "data": mine[0], "iters": 17}, {"phase": "all"}):
        server._run(98, "send_bw", {"id": mine[0], **wrong})
        refused = json.loads(out.getvalue().splitlines()[-1])["error"]
        assert refused["errno_name"] == "EINVAL", refused
    op("disconnect", id=mine[0])
    op("qp_err", id=mine[0])
    drained = op("flushed", id=mine[0], wait=0.1)
    assert "no completion within 0.1s" in str(drained["error"])  # this fake flushes nothing
    op("pause", on=True)
    op("pause", on=False)
    resolver = threading.Thread(target=resolve_when_asked, daemon=True)
    resolver.start()
    assert op("connect", dst="198.18.0.1", port=7471, resolve_timeout=2.0)["qp"]["qp_num"] == 77
    resolver.join(2)
    log = op("events", after=0)["log"]
    assert {e["kind"] for e in log} == {"event", "action"}
    ran = op("scenario", steps=[{"op": "disconnect", "id": mine[1]}], after=len(w.log.entries))
    assert [s["op"] for s in ran["steps"]] == ["disconnect"] and ran["log"] == []
    served = op("storm", role="serve", count=1, listen_id=listener, wait_s=0.1, deadline_s=2.0)
    assert served["conns"] == [] and served["actions"] == []  # no request came: idle, done
    op("destroy", id=mine[0])
    op("handles")
    assert set(answered) == set(protocol.CM_OPS)
