"""How the disconnect, listener-destroy, reject and TERMINATE races classify a round
(hil/cm/races/), from the stamps the scripts returned: on one host's clock where the
race allows, else certain only beyond the clocks' uncertainty."""

from __future__ import annotations

from dataclasses import replace

from hil.cm.races.aim import aim
from hil.cm.races.destroy_listen import _Asked as ListenRound
from hil.cm.races.destroy_listen import classify as listen_order
from hil.cm.races.destroy_listen import window as pending_window
from hil.cm.races.destroy_terminate import classify as terminate_order
from hil.cm.races.disconnects import classify as disconnect_order
from hil.cm.races.reject_request import REQUESTS, _Asked, _classified
from hil.cm.races.reject_request import classify as reject_order
from hil.cm.scenario import StepRun
from hil.judge.timeline import Event


def step(op: str, side: str, host_t_us: int | None, result: str = "ok", us: int = 0) -> StepRun:
    t = None if host_t_us is None else host_t_us + 7_000_000
    return StepRun(
        0, op, result, side, f"h{side}", id=f"{side}:1.1", t_us=t, host_t_us=host_t_us, us=us
    )


def event(kind: str, side: str, host_t_us: int) -> Event:
    return Event(f"h{side}", side, host_t_us + 7_000_000, host_t_us, kind, 0, f"{side}:1.1")


def test_a_side_that_saw_the_peers_close_before_its_own_call_was_second() -> None:
    a, p = step("disconnect", "a", 1_000), step("disconnect", "b", 50_000)
    order, why = disconnect_order(
        a, p, event("DISCONNECTED", "a", 3_000), event("DISCONNECTED", "b", 45_000)
    )
    assert order == "active_first" and "5000 µs before its rdma_disconnect" in why
    a, p = step("disconnect", "a", 9_000), step("disconnect", "b", 2_000)
    order, _ = disconnect_order(
        a, p, event("DISCONNECTED", "a", 8_000), event("DISCONNECTED", "b", 4_000)
    )
    assert order == "passive_first"


def test_closes_that_each_side_called_before_seeing_a_disconnected_crossed() -> None:
    a, p = step("disconnect", "a", 1_000), step("disconnect", "b", 1_500)
    order, _ = disconnect_order(
        a, p, event("DISCONNECTED", "a", 3_000), event("DISCONNECTED", "b", 3_100)
    )
    assert order == "crossed"
    order, why = disconnect_order(a, step("disconnect", "b", None, "skipped"), None, None)
    assert order == "unclear" and "passive skipped" in why


def test_a_listener_destroy_is_ordered_by_the_request_delivery_and_the_connects_result() -> None:
    destroy = step("destroy", "b", 10_000)
    ok, refused = step("connect", "a", 5_000), step("connect", "a", 5_000, "ECONNREFUSED")
    order, why = listen_order(ok, destroy, event("CONNECT_REQUEST", "b", 9_000))
    assert order == "request_first" and "1000 µs before the destroy" in why
    assert listen_order(ok, destroy, event("CONNECT_REQUEST", "b", 10_001))[0] == "pending"
    assert listen_order(ok, destroy, None) == (
        "pending",
        "rdma_connect ok, its CONNECT_REQUEST never delivered",
    )
    order, why = listen_order(refused, destroy, None)
    assert order == "destroy_first" and "ECONNREFUSED" in why
    assert listen_order(ok, step("destroy", "b", None, "timeout"), None)[0] == "unclear"


def test_a_listener_rounds_pending_window_runs_from_the_connects_return_to_the_delivery() -> None:
    # The connect step was due at host 0; rdma_connect ran at 36 ms for 2 ms (delays count
    # from the step's time, on the controller's base: +7 s in these builders).
    def asked(destroy_at: int, connect: StepRun | None = None) -> ListenRound:
        connect = connect or step("connect", "a", 36_000, us=2_000)
        return ListenRound("t", 0, 0, 7_000_000, connect, step("destroy", "b", destroy_at))

    request = event("CONNECT_REQUEST", "b", 60_000)
    assert pending_window(asked(70_000), request) == (38_000, 60_000)  # request_first
    assert pending_window(asked(50_000), request) == (38_000, None)  # pending: still open
    assert pending_window(asked(50_000), None) == (38_000, None)
    refused = step("connect", "a", 36_000, "ECONNREFUSED")
    assert pending_window(asked(20_000, refused), None) is None  # destroy_first: no window
    # Two closed windows and an open one (as wide as the closed ones' median): the aim
    # falls where all three overlap.
    at = aim([(38_000, 60_000), (45_000, 66_000), (40_000, None)])
    assert at is not None and 45_000 <= at <= 60_000


def test_the_second_request_is_placed_against_the_first_ones_reject_on_the_passive_clock() -> None:
    reject = step("reject", "b", 10_000, us=400)
    order, why = reject_order(reject, event("CONNECT_REQUEST", "b", 9_000))
    assert order == "upcall_first" and "1000 µs before" in why
    order, why = reject_order(reject, event("CONNECT_REQUEST", "b", 10_150))
    assert order == "during_reject" and "150 µs into the 400 µs reject" in why
    assert reject_order(reject, event("CONNECT_REQUEST", "b", 10_401))[0] == "reject_first"
    assert reject_order(reject, None)[0] == "unclear"
    assert reject_order(step("reject", "b", 10_000, "EINVAL"), None)[0] == "unclear"


def test_each_reject_is_a_round_against_the_next_request_delivered_on_its_listener() -> None:
    # Four requests delivered at 0, 0.5, 5 and 9 ms; each rejected 1 ms after its
    # delivery (the next request's delivery is the event that triggered the next reject).
    delivered = [0, 1_500, 5_000, 9_000]
    rejects = tuple(
        replace(step("reject", "b", t + 1_000, us=800), event=event("CONNECT_REQUEST", "b", t))
        for t in delivered
    )
    connects = tuple(step("connect", "a", -3_000) for _ in range(REQUESTS))
    tags = tuple(f"hil-race-0007{c}" for c in "abcd")
    got = _classified([_Asked(tags, -500, 4_500, connects, rejects)])
    assert [(r.label, r.order) for r in got] == [
        ("hil-race-0007/1", "during_reject"),  # 1.5 ms: inside the reject of 1.0-1.8 ms
        ("hil-race-0007/2", "reject_first"),
        ("hil-race-0007/3", "reject_first"),
    ]
    last = replace(rejects[3], event=None, result="timeout", t_us=None, host_t_us=None)
    got = _classified([_Asked(tags, -500, 4_500, connects, (*rejects[:3], last))])
    assert got[-1].order == "unclear" and "never delivered" in got[-1].why


def test_a_destroy_against_a_terminate_is_exact_on_its_host_and_bounded_across() -> None:
    destroy = step("destroy", "a", 50_000)  # controller 7_050_000
    mine, peer_early = event("DISCONNECTED", "a", 49_000), event("DISCONNECTED", "b", 30_000)
    order, why = terminate_order(destroy, mine, peer_early, 5_000)
    assert order == "terminate_first" and "1000 µs before" in why
    assert terminate_order(destroy, None, peer_early, 5_000)[0] == "in_flight"
    assert terminate_order(destroy, None, event("DISCONNECTED", "b", 56_000), 5_000)[0] == (
        "destroy_first"
    )
    assert terminate_order(destroy, None, event("DISCONNECTED", "b", 54_000), 5_000)[0] == (
        "unclear"
    )
    assert terminate_order(destroy, None, None, 5_000)[0] == "destroy_first"
