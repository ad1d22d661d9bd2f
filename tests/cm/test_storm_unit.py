"""Storms inside the CM worker (hil/agent/remote/cm/storm.py) and their numbers
(hil/cm/stormstats.py), over the fake librdmacm (fake_rdma.py).

A fake kernel thread answers the worker's librdmacm calls with the events the
real one sends (ADDR_RESOLVED after rdma_resolve_addr...), through the
channel's real pipe, so the stamps, the per-step waits and the failures are
exercised in-process; the real storm runs on siw in test_storm_lab.py.
"""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Callable, Iterator

import pytest
from fake_rdma import FakeLib

from hil.agent import protocol
from hil.agent.remote.cm import stormserve
from hil.agent.remote.cm.script import sleep_until
from hil.agent.remote.cm.storm import StormError
from hil.agent.remote.cm.worker import Worker
from hil.agent.remote.librdmacm import RawEvent
from hil.cm.stormstats import StepStats, percentile, rate

EVENT: dict[str, int] = {name: i for i, name in enumerate(protocol.CM_EVENT_TYPES)}
DST = "198.18.0.2"


class FakeKernel:
    """Answers resolve/connect/disconnect calls with their events; ``reject`` names the
    connects (by order) answered REJECTED instead of ESTABLISHED."""

    def __init__(self, lib: FakeLib, reject: tuple[int, ...] = ()) -> None:
        self.lib, self.reject = lib, reject
        self.stop = threading.Event()
        self.connects = 0
        self.answered = 0  # connects whose event is pushed
        self.accepted = 0  # accepts whose ESTABLISHED is pushed
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        seen = 0
        answers = {
            "rdma_resolve_addr": "ADDR_RESOLVED",
            "rdma_resolve_route": "ROUTE_RESOLVED",
            "rdma_disconnect": "DISCONNECTED",
            "rdma_accept": "ESTABLISHED",
        }
        while not self.stop.is_set():
            calls = self.lib.cm.calls[seen:]
            seen += len(calls)
            for name, args in calls:
                if name == "rdma_connect":
                    kind = "REJECTED" if self.connects in self.reject else "ESTABLISHED"
                    self.connects += 1
                    status = -104 if kind == "REJECTED" else 0
                    self.lib.cm.push(EVENT[kind], args[0], 0, status)
                    self.answered += 1
                elif name in answers:
                    self.lib.cm.push(EVENT[answers[name]], args[0])
                    if name == "rdma_accept":
                        self.accepted += 1
            time.sleep(0.001)


def within_5s(condition: Callable[[], bool]) -> bool:
    """Whether ``condition`` holds within 5 s: a fixed sleep is not enough on a loaded CI
    machine for another thread to have done its part."""
    deadline = time.monotonic() + 5
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.001)
    return True


def wait_answered(kernel: FakeKernel, before: int) -> None:
    """Wait until the fake kernel has answered one more connect."""
    assert within_5s(lambda: kernel.answered > before), (
        "the fake kernel did not answer the connect in 5 s"
    )


def storm_reading(w: Worker) -> threading.Event:
    """An event set once this thread (the storm's, called from here) reads the channel
    itself: the storm holds the channel then, so what a peer sends after it is the
    storm's to read, not the poller's."""
    me, read = threading.get_ident(), w.ch.read_event
    reading = threading.Event()

    def spy(timeout_s: float) -> RawEvent | None:
        if threading.get_ident() == me:
            reading.set()
        return read(timeout_s)

    w.ch.read_event = spy  # type: ignore[method-assign]
    return reading


@pytest.fixture
def kernel(worker: tuple[Worker, FakeLib]) -> Iterator[FakeKernel]:
    k = FakeKernel(worker[1], reject=(2,))
    yield k
    k.stop.set()
    k.thread.join(2)


def test_a_connect_storm_stamps_every_step_of_every_connection(
    worker: tuple[Worker, FakeLib], kernel: FakeKernel
) -> None:
    w, lib = worker
    got = w.storm(role="connect", count=5, dst=DST, port=7471, parallel=2, wait_s=5)
    protocol.OP_STORM.decode(got, strict=True)
    conns = got["conns"]
    assert [c["tag"] for c in conns] == [f"hil-storm-{i:04d}" for i in range(5)]
    assert sorted(c["result"] for c in conns) == ["REJECTED", "ok", "ok", "ok", "ok"]
    events = {(e["id"], e["type"]): e for e in got["log"] if e["kind"] == "event"}
    for c in conns:
        steps = c["steps"]
        want = {"create_id", "resolve_addr", "resolve_route", "create_qp", "destroy"}
        if c["result"] == "ok":
            want |= {"connect", "disconnect"}
            # A step that ends with an event ends at its stamp: one host's clock.
            t0, us = steps["connect"]
            assert t0 + us == events[(c["id"], "ESTABLISHED")]["host_t_us"]
            t0, us = steps["disconnect"]
            assert t0 + us == events[(c["id"], "DISCONNECTED")]["host_t_us"]
        assert set(steps) == want, c
        assert all(us >= 0 for _, us in steps.values())
        assert steps["resolve_addr"][0] >= steps["create_id"][0]
    # Every CM call comes back as an action: 5 connects, 4 disconnects, 5 destroys.
    names = [a["name"] for a in got["actions"]]
    assert (names.count("connect"), names.count("disconnect"), names.count("destroy")) == (5, 4, 5)
    # cmtime's disconnect step: rdma_disconnect, then the QP goes at once (said in params).
    assert {str(a["params"]) for a in got["actions"] if a["name"] == "disconnect"} == {
        "{'destroy_qp': True}"
    }
    pdata = sorted(a["params"]["private_data"] for a in got["actions"] if a["name"] == "connect")
    assert pdata == [f"hil-storm-{i:04d}".encode().hex() for i in range(5)]
    assert w.ch.handles() == []


def test_a_connect_storm_reads_the_channel_itself_as_cmtime_does(
    worker: tuple[Worker, FakeLib], kernel: FakeKernel
) -> None:
    """Every event of the storm is read by the storm's thread (the poller out meanwhile),
    logged once and in order, those already queued between two calls; every rdma_connect
    is issued from it too (parallel 1, the default; with more the replies are read the same
    way after the connect threads); afterwards the poller reads again."""
    w, lib = worker
    me = threading.get_ident()
    readers: list[tuple[int, str]] = []
    connecting: set[int] = set()
    poll, connect = w.ch.read_event, w.ch.connect

    def read(timeout_s: float) -> RawEvent | None:
        ev = poll(timeout_s)
        if ev is not None:
            readers.append((threading.get_ident(), ev.type))
        return ev

    def issue(handle: int, private_data: bytes = b"", ird: int = 1, ord: int = 1) -> None:
        connecting.add(threading.get_ident())
        before = kernel.answered
        connect(handle, private_data, ird, ord)
        wait_answered(kernel, before)  # as siw's blocks: answered before it returns

    w.ch.read_event, w.ch.connect = read, issue  # type: ignore[method-assign]
    got = w.storm(role="connect", count=6, dst=DST, port=7471, wait_s=5)
    assert sorted(c["result"] for c in got["conns"]) == ["REJECTED"] + ["ok"] * 5
    assert {who for who, _ in readers} == {me} and len(readers) == 6 * 3 + 5
    events = [(e["type"], e["id"]) for e in got["log"] if e["kind"] == "event"]
    assert [t for t, _ in events] == [t for _, t in readers] and len(set(events)) == len(events)
    assert [e["seq"] for e in got["log"]] == list(range(1, len(got["log"]) + 1))
    assert connecting == {me}
    # A reply already queued is read between two calls, not after the last one: its stamp
    # is within one call of its arrival.
    last_call = max(a["t_us"] for a in got["actions"] if a["name"] == "connect")
    replies = [e["host_t_us"] for e in got["log"] if e["kind"] == "event"][12:17]
    assert sum(t < last_call for t in replies) >= 3, (replies, last_call)
    assert not w.poller.paused.is_set() and not w.poller.reading.locked()
    lib.cm.push(EVENT["ADDR_RESOLVED"], lib.cm.new_id())
    # The poller's again; 10 s, not 2: under a loaded ci/tests its thread once took longer.
    assert w.log.wait(len(w.log.entries), ["ADDR_RESOLVED"], None, 10)
    assert readers[-1][0] != me


def test_a_storm_runs_without_garbage_collection_and_restores_it(
    worker: tuple[Worker, FakeLib], kernel: FakeKernel
) -> None:
    """No collection pause inside the timed steps; the worker collects again after."""
    w, _ = worker
    seen: list[bool] = []
    connect = w.ch.connect

    def spy(handle: int, private_data: bytes = b"", ird: int = 1, ord: int = 1) -> None:
        seen.append(gc.isenabled())
        connect(handle, private_data, ird, ord)

    w.ch.connect = spy  # type: ignore[method-assign]
    assert gc.isenabled()
    w.storm(role="connect", count=2, dst=DST, port=7471, wait_s=5)
    assert seen == [False, False] and gc.isenabled()


def test_traffic_waits_for_every_send_s_completion(
    worker: tuple[Worker, FakeLib], kernel: FakeKernel
) -> None:
    w, lib = worker  # the fake's CQs are one: a single connection
    got = w.storm(role="connect", count=1, dst=DST, port=7471, traffic=3, wait_s=5)
    (conn,) = got["conns"]
    assert conn["result"] == "ok" and conn["steps"]["traffic"][1] >= 0
    assert len(lib.verbs.sent) == 0  # the three SENDs were posted and completed


def test_a_step_whose_event_never_comes_fails_its_connections_and_still_destroys(
    worker: tuple[Worker, FakeLib],
) -> None:
    w, _ = worker  # no fake kernel: no ADDR_RESOLVED ever comes
    got = w.storm(role="connect", count=3, dst=DST, port=7471, wait_s=0.1)
    assert {c["result"] for c in got["conns"]} == {"resolve_addr: no ADDR_RESOLVED within 0.1s"}
    assert [a["name"] for a in got["actions"]] == ["destroy"] * 3
    assert w.ch.handles() == []


def test_serve_accepts_each_request_and_destroys_each_id_on_its_disconnected(
    worker: tuple[Worker, FakeLib], kernel: FakeKernel
) -> None:
    w, lib = worker
    listener = w.listen(DST, 7471)["id"]
    children = [lib.cm.new_id() for _ in range(3)]
    holding = storm_reading(w)

    def peer() -> None:
        holding.wait(5)  # the storm holds the channel: the requests are its to read
        for i, child in enumerate(children):
            tag = f"hil-storm-p0-{i:04d}".encode() + b"\0\0"  # a provider may pad
            lib.cm.push(EVENT["CONNECT_REQUEST"], child, w.ch._id(listener).ptr, 0, tag)
        # The closes after each ESTABLISHED, as a real peer's come (the fake kernel's
        # answers to the accepts may take longer than any fixed wait on a loaded machine).
        assert within_5s(lambda: kernel.accepted == len(children)), "accepts unanswered in 5 s"
        for child in children:
            lib.cm.push(EVENT["DISCONNECTED"], child)

    threading.Thread(target=peer, daemon=True).start()
    got = w.storm(role="serve", count=3, listen_id=listener, wait_s=5, idle_s=2)
    assert holding.is_set(), "the storm never read its channel itself"
    protocol.OP_STORM.decode(got, strict=True)
    assert [c["tag"] for c in got["conns"]] == [f"hil-storm-p0-{i:04d}" for i in range(3)]
    for c in got["conns"]:
        assert c["result"] == "ok"
        assert set(c["steps"]) == {"accept", "established", "disconnected", "destroy"}
    names = [a["name"] for a in got["actions"]]
    assert names.count("accept") == 3 and names.count("destroy") == 3
    assert w.ch.handles() == [listener]


def test_connections_without_traffic_share_one_pd_and_cq_and_get_no_buffer(
    worker: tuple[Worker, FakeLib], kernel: FakeKernel
) -> None:
    """cmtime's QPs: the worker's one PD and CQ, no MR, no receive; freed when it closes."""
    w, lib = worker
    got = w.storm(role="connect", count=4, dst=DST, port=7471, parallel=2, wait_s=5)
    assert all("create_qp" in c["steps"] for c in got["conns"])
    assert lib.verbs.made == ["pd", "cq"]  # once, for the 4 QPs
    assert len(set(lib.cm.qp_pds)) == 1 and len(lib.cm.qp_pds) == 4
    assert lib.verbs.recvs == 0
    assert lib.verbs.released == []  # the shared PD and CQ outlive the storm's ids...
    w.poller.closing.set()
    # Closed under the poller's read lock: its last read of the channel is over and it
    # starts none on the channel being closed (a fixed 0.3 s was not always enough).
    assert w.poller.reading.acquire(timeout=5), "the poller's read did not end in 5 s"
    try:
        w.close()
    finally:
        w.poller.reading.release()
    assert lib.verbs.released == ["cq", "pd"]  # ...and go with the channel


def test_serve_reads_the_channel_itself_and_logs_each_event_once_in_order(
    worker: tuple[Worker, FakeLib],
) -> None:
    """While serving, the storm reads the channel, not the poller: each event is logged
    once, in order; afterwards the poller reads again."""
    w, lib = worker
    listener = w.listen(DST, 7471)["id"]
    children = [lib.cm.new_id() for _ in range(2)]
    lp = w.ch._id(listener).ptr
    holding = storm_reading(w)

    made_first: list[str] = []

    def peer() -> None:
        holding.wait(5)  # the storm holds the channel: the requests are its to read
        made_first.extend(lib.verbs.made)
        for i, child in enumerate(children):
            lib.cm.push(EVENT["CONNECT_REQUEST"], child, lp, 0, f"hil-storm-p0-{i:04d}".encode())
        for child in children:
            lib.cm.push(EVENT["DISCONNECTED"], child)

    threading.Thread(target=peer, daemon=True).start()
    got = w.storm(role="serve", count=2, listen_id=listener, wait_s=5, idle_s=2)
    assert holding.is_set(), "the storm never read its channel itself"
    assert [c["tag"] for c in got["conns"]] == ["hil-storm-p0-0000", "hil-storm-p0-0001"]
    assert all(c["result"] == "ok" and "destroy" in c["steps"] for c in got["conns"])
    events = [(e["type"], e["id"]) for e in got["log"] if e["kind"] == "event"]
    assert len(events) == len(set(events)) == 4
    seqs = [e["seq"] for e in got["log"]]
    assert seqs == list(range(1, len(seqs) + 1))
    # cmtime's QPs: the listener's device got its one PD and CQ before the first request.
    assert made_first == lib.verbs.made == ["pd", "cq"] and len(set(lib.cm.qp_pds)) == 1
    assert not w.poller.paused.is_set() and not w.poller.reading.locked()
    late = lib.cm.new_id()
    lib.cm.push(EVENT["CONNECT_REQUEST"], late, lp, 0, b"x")
    assert w.log.wait(len(w.log.entries), ["CONNECT_REQUEST"], None, 2)  # the poller's again


def test_serve_accepts_a_request_first_and_keeps_its_bookkeeping_for_after(
    worker: tuple[Worker, FakeLib], kernel: FakeKernel
) -> None:
    """A request's QP and rdma_accept come right after its read: no record of it made yet,
    nothing of the storm logged (that waits until the serving ended); the accept step is
    still measured from the request's read."""
    w, lib = worker
    listener = w.listen(DST, 7471)["id"]
    lp = w.ch._id(listener).ptr
    mark = len(w.log.entries)
    at_accept: list[tuple[int, int]] = []
    accept = w.ch.accept

    def spy(handle: int, private_data: bytes = b"", ird: int = 1, ord: int = 1) -> None:
        at_accept.append((len(w.log.entries), len(lib.cm.qp_pds)))
        accept(handle, private_data, ird, ord)

    def peer() -> None:
        holding.wait(5)  # the storm holds the channel: the requests are its to read
        children = [lib.cm.new_id() for _ in range(2)]
        for i, child in enumerate(children):
            lib.cm.push(EVENT["CONNECT_REQUEST"], child, lp, 0, f"hil-storm-p0-{i:04d}".encode())
        # Each ESTABLISHED before the closes; a timeout fails the test (a thread's exception).
        assert within_5s(lambda: kernel.accepted == len(children)), "accepts unanswered in 5 s"
        for child in children:
            lib.cm.push(EVENT["DISCONNECTED"], child)

    w.ch.accept = spy  # type: ignore[method-assign]
    holding = storm_reading(w)
    threading.Thread(target=peer, daemon=True).start()
    got = w.storm(role="serve", count=2, listen_id=listener, wait_s=5, idle_s=2)
    assert holding.is_set(), "the storm never read its channel itself"
    assert at_accept == [(mark, 1), (mark, 2)]  # each after its QP, before any log entry
    requests = [e for e in got["log"] if e["kind"] == "event" and e["type"] == "CONNECT_REQUEST"]
    accepts = [a for a in got["actions"] if a["name"] == "accept"]
    assert [c["tag"] for c in got["conns"]] == ["hil-storm-p0-0000", "hil-storm-p0-0001"]
    for c, request, action in zip(got["conns"], requests, accepts, strict=True):
        assert c["result"] == "ok" and request["id"] == c["id"] == action["id"]
        t0, us = c["steps"]["accept"]
        assert t0 == request["host_t_us"] and t0 + us == action["t_us"] + action["us"]
    types = [e["type"] for e in got["log"] if e["kind"] == "event"]
    assert sorted(types) == ["CONNECT_REQUEST"] * 2 + ["DISCONNECTED"] * 2 + ["ESTABLISHED"] * 2


def test_a_connect_step_s_events_are_logged_once_its_span_ended(
    worker: tuple[Worker, FakeLib], kernel: FakeKernel
) -> None:
    """Inside a step an event costs its read only: the ESTABLISHEDs read between two
    rdma_connect calls are in the log by the first disconnect, not before the last
    connect; stamped when read, in order."""
    w, _ = worker
    established_at: list[int] = []
    connect, disconnect = w.ch.connect, w.ch.disconnect

    def logged() -> int:
        return sum(e["kind"] == "event" and e["type"] == "ESTABLISHED" for e in w.log.entries)

    def slow_connect(handle: int, private_data: bytes = b"", ird: int = 1, ord: int = 1) -> None:
        established_at.append(logged())
        before = kernel.answered
        connect(handle, private_data, ird, ord)
        wait_answered(kernel, before)  # queued before the next call: read between calls

    def spy(handle: int) -> None:
        established_at.append(logged())
        disconnect(handle)

    w.ch.connect, w.ch.disconnect = slow_connect, spy  # type: ignore[method-assign]
    got = w.storm(role="connect", count=4, dst=DST, port=7471, wait_s=5)
    assert sorted(c["result"] for c in got["conns"]) == ["REJECTED", "ok", "ok", "ok"]
    assert established_at == [0, 0, 0, 0] + [3] * 3  # 4 connects, then 3 disconnects
    stamps = [e["host_t_us"] for e in got["log"] if e["kind"] == "event"]
    assert stamps == sorted(stamps)
    last_connect = max(a["t_us"] for a in got["actions"] if a["name"] == "connect")
    replies = [
        e["host_t_us"] for e in got["log"] if e["kind"] == "event" and e["type"] == "ESTABLISHED"
    ]
    assert sum(t < last_connect for t in replies) >= 2  # read between calls, stamped then


def test_serve_holding_its_channel_leaves_requests_unread_until_the_hold_ends(
    worker: tuple[Worker, FakeLib], monkeypatch: pytest.MonkeyPatch
) -> None:
    w, lib = worker
    listener = w.listen(DST, 7471)["id"]
    child = lib.cm.new_id()

    def hold(target_us: int) -> None:
        # The request and its close come as the hold begins, the storm holding its channel
        # (timers' could come before the storm took it, on a loaded machine).
        lib.cm.push(EVENT["CONNECT_REQUEST"], child, w.ch._id(listener).ptr, 0, b"x")
        lib.cm.push(EVENT["DISCONNECTED"], child)
        sleep_until(target_us)

    monkeypatch.setattr(stormserve, "sleep_until", hold)
    start = time.monotonic_ns() // 1000
    got = w.storm(
        role="serve", count=1, listen_id=listener, hold_s=0.6, start_us=start, deadline_s=5
    )
    request = next((e for e in got["log"] if e["kind"] == "event"), None)
    assert request is not None, "the storm held nothing (no request came)"
    assert request["host_t_us"] - start >= 500_000  # read after the hold, not when it came
    assert got["conns"][0]["steps"]["accept"][0] == request["host_t_us"]


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"role": "serve", "count": 1}, "serve needs listen_id"),
        ({"role": "connect", "count": 1, "dst": DST}, "connect needs port"),
        ({"role": "connect", "count": 0, "dst": DST, "port": 1}, "count must be 1..1024"),
        ({"role": "connect", "count": 1, "dst": DST, "port": 1, "traffic": 17}, "traffic"),
    ],
)
def test_bad_storm_params_are_refused_before_anything_runs(
    worker: tuple[Worker, FakeLib], params: dict[str, object], message: str
) -> None:
    w, lib = worker
    with pytest.raises(StormError, match=message):
        w.storm(**params)  # type: ignore[arg-type]
    assert lib.cm.calls == []


def test_step_stats_are_nearest_rank_percentiles_and_the_span() -> None:
    assert percentile(list(range(1, 101)), 50) == 50
    assert percentile(list(range(1, 101)), 99) == 99
    assert percentile([7], 99) == 7
    stats = StepStats.of("connect", [[100, 10], [105, 30], [110, 20]])
    assert stats == StepStats("connect", 3, 20, 30, 30, 35)
    assert stats.percentiles() == {"p50": 20, "p99": 30, "max": 30}
    assert StepStats.of("connect", []) is None
    # cmtime's measure: connections over the connect and disconnect spans.
    assert rate(10, StepStats("c", 10, 1, 1, 1, 400_000), StepStats("d", 10, 1, 1, 1, 100_000)) == (
        pytest.approx(20.0)
    )
    assert rate(10, None) == 0.0


class _Ep:
    """What the storm's bookkeeping asks of an endpoint: its ids' timeline names."""

    def __init__(self, side: str, number: int) -> None:
        self.side, self.number = side, number

    def name(self, handle: int | None) -> str | None:
        return None if handle is None else f"{self.side}:{self.number}.{handle}"


def _reply(conns: list[protocol.StormConn]) -> protocol.StormReply:
    return {"t_us": 0, "end_us": 0, "conns": conns, "actions": [], "log": []}


def test_a_storm_s_numbers_come_from_both_sides_stamps() -> None:
    """Two active processes (one host clock), one passive: per-step stats over all
    connections, cmtime's rate, rejects and both sides' closes counted."""
    from hil.cm.storm import _result

    def active(i: int, t: int, result: str = "ok") -> protocol.StormConn:
        steps = {"create_id": [t, 10], "destroy": [t + 5000, 50]}
        if result != "REJECTED":
            steps["connect"] = [t + 100, 1000 + i]
        if result == "ok":
            steps["disconnect"] = [t + 2000, 500]
        return {"index": i, "tag": f"t{i}", "result": result, "id": i + 1, "steps": steps}

    a = [
        (_Ep("a", 1), _reply([active(0, 0), active(1, 10)])),
        (_Ep("a", 2), _reply([active(2, 20, "REJECTED"), active(3, 30, "ETIMEDOUT")])),
    ]
    passive: protocol.StormConn = {
        "index": 0,
        "tag": "t0",
        "result": "ok",
        "id": 7,
        "steps": {"accept": [50, 300], "disconnected": [2600, 0], "destroy": [2600, 40]},
    }
    p = [(_Ep("b", 1), _reply([passive]))]
    got = _result(a, p, 2, [], 4, 1024, 0)  # type: ignore[arg-type]
    assert (got.count, got.established, got.rejected) == (4, 3, 1)
    assert got.failed == ("t3: ETIMEDOUT",)
    assert (got.closed_active, got.closed_passive) == (2, 1)
    connect = got.step("connect")
    assert connect is not None and (connect.n, connect.max_us, connect.span_us) == (3, 1003, 1033)
    disconnect = got.step("disconnect")
    assert disconnect is not None and disconnect.span_us == 510
    assert got.rate_per_s == pytest.approx(2 / ((1033 + 510) / 1e6))
    assert got.cycle_rate_per_s == pytest.approx(2 / (5080 / 1e6))
    assert got.step("accept", passive=True) is not None and got.step("accept") is None
    assert got.metrics()["storm_connect_max_us"] == 1003
    assert got.metrics()["storm_passive_accept_p50_us"] == 300
    assert "4 connections" in got.table()
