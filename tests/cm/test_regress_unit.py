"""What the regression cases count as their scenario having happened (hil/cm/regressions/).

The cases themselves run on real siw in suites/test_regressions.py; here the
evidence functions get timelines and stamps made up to be reached or not.
"""

from __future__ import annotations

import struct
import time

import pytest

from hil.agent.protocol import CloseRound
from hil.agent.types import CommandResult, RdmaLink
from hil.cm.clock import controller_us
from hil.cm.endpoint import Outcome
from hil.cm.regressions import device
from hil.cm.regressions.cxgb4 import Churned, while_waiting
from hil.cm.regressions.device import DEVICE, Queries, bind, gid_evidence
from hil.cm.regressions.evidence import missing, noted, trace_findings, unobservable
from hil.cm.regressions.iwcm import _early
from hil.cm.regressions.siw import MARKERS, _fastest, _overlap, _rejecting
from hil.cm.regressions.siwqp import zero_evidence
from hil.cm.regressions.ucma import right_after
from hil.cm.scenario import ScenarioRun, StepRun
from hil.judge.timeline import Action, Event, Timeline


def timeline(**metrics: float) -> Timeline:
    return Timeline("regress-x", "siw", ("ha", "hb"), metrics=dict(metrics))


def test_a_run_that_saw_every_condition_is_not_missing_anything() -> None:
    tl = timeline(reached_a_thing=1.0, reached_another=1.0, window_the_bug=1.0, refused=3.0)
    assert missing(tl) is None
    assert unobservable(tl) is None


def test_a_run_that_never_hit_its_window_fails_window_not_reached() -> None:
    # The setup happened, the bug's window did not: no pass (issue 28, item 2).
    tl = timeline(reached_a_thing=1.0, window_work_queued_at_destroy=0.0, window_b=1.0)
    assert missing(tl) == "window not reached (regress-x): work queued at destroy"


def test_a_run_that_measured_no_window_fails_window_not_reached() -> None:
    gap = missing(timeline(reached_a_thing=1.0))
    assert gap is not None and gap.startswith("window not reached: regress-x measured no window")


def test_a_setup_not_reached_is_named_before_any_window() -> None:
    gap = missing(timeline(reached_a_thing=0.0, window_w=0.0))
    assert gap == "scenario not reached (regress-x): a thing"


def test_a_window_the_kernel_cannot_show_is_not_observable_not_missing() -> None:
    # -1: no tracepoints on this kernel; the test skips (never passes) with this reason.
    tl = timeline(reached_a_thing=1.0, window_reject_in_upcall=-1.0)
    assert missing(tl) is None
    blind = unobservable(tl)
    assert blind is not None and blind.startswith(
        "window not observable on this kernel (regress-x): reject in upcall"
    )
    # Tracepoints or a widening show a window: the reason names both, not one.
    assert "tracepoints (the debug lab) or a widened kernel's lines" in blind


def test_what_the_trace_showed_and_the_fix_rules_out_is_a_finding() -> None:
    # 6883b680e703 on 6.1: no KASAN report, but the trace shows the id freed in the work.
    tl = timeline(reached_a_thing=1.0, window_w=1.0, traced_ids_freed_inside_their_work=2.0)
    assert trace_findings(tl) == "kernel trace (regress-x): ids freed inside their work (2 times)"
    assert trace_findings(timeline(traced_ids_freed_inside_their_work=0.0)) is None


def test_a_trace_the_kernel_cannot_take_is_not_observable_not_a_pass() -> None:
    tl = timeline(reached_a_thing=1.0, window_w=1.0, traced_ids_freed_inside_their_work=-1.0)
    assert trace_findings(tl) is None and missing(tl) is None
    blind = unobservable(tl)
    assert blind is not None and "ids freed inside their work" in blind


def test_every_condition_not_seen_is_named() -> None:
    gap = missing(timeline(reached_a_thing=0.0, reached_b_thing=1.0, reached_c_thing=0.0))
    assert gap == "scenario not reached (regress-x): a thing, c thing"


def test_a_run_that_says_nothing_of_its_scenario_is_missing_it() -> None:
    gap = missing(timeline(refused=3.0))
    assert gap is not None and "recorded no reached_* metric" in gap


def test_only_an_mpa_reply_with_the_reject_bit_is_a_rejecting_answer() -> None:
    reply = b"MPA ID Rep Frame" + struct.pack(">HH", 0x2001, 0)
    assert _rejecting(reply)
    assert not _rejecting(b"MPA ID Rep Frame" + struct.pack(">HH", 0x0001, 0))  # accepting
    assert not _rejecting(MARKERS)  # a request frame echoed is no reply
    assert not _rejecting(b"")


def request(t_us: int, cm_id: str) -> Event:
    return Event("hb", "b", t_us, t_us - 50, "CONNECT_REQUEST", 0, cm_id)


def reject(t_us: int, cm_id: str) -> Action:
    return Action(t_us, "b", "reject", cm_id, {"auto": True}, "ok", 300)


def test_a_reject_before_a_later_request_arrived_overlaps_the_processing() -> None:
    requests = [request(1_000, "b:1.1"), request(2_000, "b:1.2")]
    assert _overlap(requests, [reject(1_400, "b:1.1"), reject(2_300, "b:1.2")])
    # Each reject after every request: the listener had nothing left to process.
    assert not _overlap(requests, [reject(2_100, "b:1.1"), reject(2_300, "b:1.2")])
    assert _fastest(requests, [reject(1_400, "b:1.1"), reject(2_300, "b:1.2")]) == 300
    assert _fastest(requests, []) is None


def destroy(host_t_us: int, cm_id: str) -> StepRun:
    return StepRun(0, "destroy", "ok", "b", "hb", id=cm_id, t_us=host_t_us + 7, host_t_us=host_t_us)


def closed(host_t_us: int, cm_id: str) -> Event:
    return Event("hb", "b", host_t_us + 7, host_t_us, "DISCONNECTED", 0, cm_id)


def test_an_id_destroyed_before_its_disconnected_came_counts_as_early() -> None:
    run = ScenarioRun("b", "hb", 0, 0, 0, (destroy(500, "b:1.1"), destroy(600, "b:1.2")), ())
    # b:1.1's DISCONNECTED triggered the destroys; b:1.2's came only after its destroy.
    events = [closed(400, "b:1.1"), closed(900, "b:1.2")]
    assert _early(run, events) == 1
    assert _early(run, [closed(400, "b:1.1"), closed(450, "b:1.2")]) == 0
    skipped = StepRun(1, "destroy", "skipped", "b", "hb", id="b:1.3")
    assert _early(ScenarioRun("b", "hb", 0, 0, 0, (skipped,), ()), []) == 0


class FakeAgent:
    """The agent boundary of ``Queries``: lists the device twice, then fails once, then not."""

    def __init__(self, query_s: float = 0.01) -> None:
        self.calls = 0
        self.query_s = query_s

    def rdma_links(self, timeout: float | None = None) -> list[RdmaLink]:
        self.calls += 1
        time.sleep(self.query_s)
        if self.calls == 3:
            raise RuntimeError("rdma link show: device vanished")
        present = self.calls < 3
        return [RdmaLink(DEVICE if present else "siw0", 1, "ACTIVE", "LINK_UP", "hilrg0")]


def test_port_queries_record_when_they_ran_and_what_they_saw() -> None:
    with Queries(FakeAgent()) as q:  # type: ignore[arg-type]
        while len(q.done) < 5:
            time.sleep(0.01)
    listed = [seen for *_, seen in q.done]
    assert listed[:2] == [True, True] and not any(listed[2:])
    assert q.failed == ["RuntimeError: rdma link show: device vanished"]
    start, end, _ = q.done[1]
    assert q.across((start + end) // 2) and not q.across(q.done[0][0] - 1)


def test_the_removal_waits_for_a_query_that_listed_the_device() -> None:
    # On a debug guest no query had ended in the 0.3 s the case used to wait.
    with Queries(FakeAgent()) as q:  # type: ignore[arg-type]
        assert q.wait_listed(5.0)
        assert q.done[0][2]
    agent = FakeAgent()
    agent.calls = 3  # the device is never listed
    with Queries(agent) as q:  # type: ignore[arg-type]
        assert not q.wait_listed(0.03)


class Listens:
    """The bound endpoint's listens: refused with ``refusals`` first, then ``last``;
    what the queries had seen when each came."""

    def __init__(self, queries: Queries, refusals: int, last: str = "ok") -> None:
        self.queries, self.refusals, self.last = queries, refusals, last
        self.seen: list[int] = []  # queries ended when each listen came

    def __call__(self) -> Outcome:
        self.seen.append(len(self.queries.done))
        result = "ENODEV" if len(self.seen) <= self.refusals else self.last
        return Outcome(Action(controller_us(), "a", "listen", "a:2.1", {}, result))


def test_the_removal_may_begin_only_once_the_id_is_bound_and_a_query_ran_after() -> None:
    # A niced debug guest beside CI: the listen was refused (ENODEV) and the removal came
    # anyway, after a fixed 0.3 s.  Now each step waits for the one before it.
    with Queries(FakeAgent(query_s=0.02)) as q:  # type: ignore[arg-type]
        listens = Listens(q, refusals=2)
        got = bind(listens, q, 5.0, sleep=lambda s: None)
        ended = list(q.done)  # what had ended when the removal could begin
    assert got.ok and got.tries == 3
    assert listens.seen[0] >= 1 and ended[0][2]  # a query listed the device before the listen
    assert any(start > got.listen.action.t_us for start, *_ in ended)


def test_an_id_never_bound_allows_no_removal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(device, "RETRY_S", 0.01)
    with Queries(FakeAgent()) as q:  # type: ignore[arg-type]
        # A bound the first listen comes well within on a loaded machine too (in 0.05 s the
        # query thread may not have listed the device yet, leaving time for one listen).
        got = bind(Listens(q, refusals=1000), q, 2.0)
    assert not got.ok and got.listen.action.result == "ENODEV" and got.tries >= 2
    with Queries(FakeAgent()) as q:  # type: ignore[arg-type]
        got = bind(Listens(q, refusals=0, last="EADDRINUSE"), q, 5.0)
    assert not got.ok and got.tries == 1  # only ENODEV is tried again


class SysfsAgent:
    """The agent boundary of ``gid_evidence``: sysfs's GID 0 and the netdev's address."""

    def __init__(self, gid: str, mac: str) -> None:
        self.files = {"gids/0": gid, "address": mac}

    def run(self, argv: list[str], timeout: float) -> CommandResult:
        text = next(v for k, v in self.files.items() if argv[-1].endswith(k))
        return CommandResult(tuple(argv), 0, text + "\n", "")


@pytest.mark.parametrize(
    "gid, want",
    [
        ("0a1b:2c3d:4e5f:0000:0000:0000:0000:0000", (1.0, 1.0)),
        ("0000:0000:0000:0000:0000:0000:0000:0000", (0.0, 0.0)),  # no GID entry
        ("0a1b:2c3d:4e60:0000:0000:0000:0000:0000", (1.0, 0.0)),  # another MAC
    ],
)
def test_the_gid_evidence_says_whether_the_device_has_its_netdevs_mac(
    gid: str, want: tuple[float, float]
) -> None:
    got = gid_evidence(SysfsAgent(gid, "0a:1b:2c:3d:4e:5f"))  # type: ignore[arg-type]
    assert (got["gid0_set"], got["gid0_is_the_netdev_mac"]) == want


@pytest.mark.parametrize(
    "route_us, close_after_us, prompt",
    [
        (300, 60, True),  # the plain kernel: within 100 µs
        (300, 140, False),
        (1175, 158, True),  # the debug kernel (lab, 2026-12-01): a quarter of a slow call
        (612, 189, False),
        (3089, 1123, False),
    ],
)
def test_a_close_right_after_resolve_route_is_within_100us_or_a_quarter_of_the_call(
    route_us: int, close_after_us: int, prompt: bool
) -> None:
    r = CloseRound(route_us=route_us, close_after_us=close_after_us, queued=True, t_us=1)
    assert right_after(r) is prompt


def test_noted_adds_a_reached_and_a_window_metric_each_and_keeps_the_others() -> None:
    tl = noted(timeline(refused=3.0), {"a_thing": True, "b_thing": False}, {"w": None})
    assert tl.metrics == {
        "refused": 3.0,
        "reached_a_thing": 1.0,
        "reached_b_thing": 0.0,
        "window_w": -1.0,
    }
    assert missing(tl) == "scenario not reached (regress-x): b thing"
    tl = noted(timeline(), {"a_thing": True}, {"w": False})
    assert missing(tl) == "window not reached (regress-x): w"


def established(side: str, ird: int | None, ord_: int | None) -> Event:
    host = "ha" if side == "a" else "hb"
    return Event(
        host,
        side,
        5,
        5,
        "ESTABLISHED",
        0,
        f"{side}:1",
        responder_resources=ird,
        initiator_depth=ord_,
    )


def query(side: str, result: str = "ok") -> Action:
    return Action(6, side, "query_qp", f"{side}:1", {"max_rd_atomic": 0}, result)


def test_zero_ird_ord_is_reached_with_both_sides_at_zero_and_both_depths_read() -> None:
    both = (established("a", 0, 0), established("b", 0, 0))
    tl = Timeline("ird-ord-0-0-0-0", "siw", ("ha", "hb"), (query("a"), query("b")), both)
    assert missing(zero_evidence(tl)) is None
    one_side = Timeline("z", "siw", ("ha", "hb"), (query("a"), query("b")), both[:1])
    assert "both sides established" in (missing(zero_evidence(one_side)) or "")
    not_zero = (established("a", 0, 0), established("b", 1, 0))
    tl = Timeline("z", "siw", ("ha", "hb"), (query("a"), query("b", "EINVAL")), not_zero)
    gap = missing(zero_evidence(tl))
    assert gap == (
        "scenario not reached (z): both qps read queue depths read, "
        "both sides established with ird and ord 0"
    )


def test_only_connections_churned_between_the_dial_and_the_answer_count() -> None:
    done = [Churned(90, 150), Churned(110, 190), Churned(200, 260), Churned(250, 320)]
    assert while_waiting(done, 100, 300) == [Churned(110, 190), Churned(200, 260)]
    assert while_waiting(done, 400, 500) == []
