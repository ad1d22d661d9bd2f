"""Invariants 1-10: each rule fails on a hand-built violating timeline and passes a good one."""

from __future__ import annotations

import errno
from dataclasses import replace

import pytest
from cmtimelines import (
    Builder,
    connected,
    destroy_in_conn_sent,
    listener_destroyed,
    orderly_close,
    rejected,
)
from contractcheck import breaks, conforms

from hil.judge.contract import Violation, check
from hil.judge.profiles import IW_CXGB4, SIW, Profile
from hil.judge.timeline import Timeline


def orderly_close_builder() -> Builder:
    """c1 closed by a's rdma_disconnect: DISCONNECTED on a at 101, on b at 103."""
    b = connected()
    b.act("a", "disconnect", "a:1", 100).ev("a", "DISCONNECTED", "a:1", 101)
    return b.ev("b", "DISCONNECTED", "b:2", 103)


def _run(tl: Timeline, profile: Profile, rule: str) -> tuple[Violation, ...]:
    return check(tl, profile, rules=[rule]).violations


@pytest.mark.parametrize("profile", [SIW, IW_CXGB4], ids=lambda p: p.name)
def test_a_plain_connect_and_close_conform(profile: Profile) -> None:
    conforms(connected(profile.name).build(), profile)
    conforms(orderly_close(profile.name), profile)


def test_connect_ends_once_two_replies() -> None:
    b = connected()
    b.ev("a", "REJECTED", "a:1", 8, -errno.ECONNRESET)
    v = breaks(b.build(), SIW, "connect-ends-once", "a:1 got 2 connect replies")
    assert {e.type for e in v.violations[0].events} == {"ESTABLISHED", "REJECTED"}


def test_connect_ends_once_disconnected_first() -> None:
    b = Builder("connect")
    b.act("a", "connect", "a:1", 1)
    b.ev("a", "DISCONNECTED", "a:1", 2).ev("a", "ESTABLISHED", "a:1", 3)
    breaks(b.build(), SIW, "connect-ends-once", "DISCONNECTED before its connect reply")


def test_connect_ends_once_no_reply() -> None:
    b = Builder("connect").act("a", "connect", "a:1", 1)
    breaks(b.build(), SIW, "connect-ends-once", "ended with none of")


def test_connect_ends_once_failed_connect_then_event() -> None:
    b = Builder("connect").act("a", "connect", "a:1", 1, "ECONNREFUSED")
    b.ev("a", "REJECTED", "a:1", 3, -errno.ECONNRESET)
    breaks(b.build(), SIW, "connect-ends-once", "failed (ECONNREFUSED) yet events followed")


def test_second_connect_request_only_with_mpa_v1_retry() -> None:
    b = connected()
    b.ev("b", "CONNECT_REQUEST", "b:3", 5, listen_id="b:1")
    tl = b.build()
    breaks(tl, SIW, "connect-ends-once", "2 CONNECT_REQUESTs (at most 1")
    assert not [v for v in _run(tl, IW_CXGB4, "connect-ends-once")]


def test_no_ib_only_events() -> None:
    b = connected()
    b.ev("a", "TIMEWAIT_EXIT", "a:1", 50)
    breaks(b.build(), SIW, "no-ib-only-events", "InfiniBand-only")


def test_disconnect_once_twice() -> None:
    b = connected()
    b.ev("a", "DISCONNECTED", "a:1", 50).ev("a", "DISCONNECTED", "a:1", 51)
    breaks(b.build(), SIW, "disconnect-once-after-established", "a:1 got 2 DISCONNECTED")


def test_disconnect_once_without_established() -> None:
    b = Builder("x").ev("b", "CONNECT_REQUEST", "b:2", 1, listen_id="b:1")
    b.act("b", "accept", "b:2", 2).ev("b", "DISCONNECTED", "b:2", 3)
    breaks(b.build(), SIW, "disconnect-once-after-established", "without ESTABLISHED")


def test_no_event_before_accept() -> None:
    b = Builder("x").ev("b", "CONNECT_REQUEST", "b:2", 1, listen_id="b:1")
    b.ev("b", "ESTABLISHED", "b:2", 2).act("b", "accept", "b:2", 3)
    breaks(b.build(), SIW, "no-event-before-accept", "b:2 got events before accept")


def test_no_event_for_a_rejected_request() -> None:
    b = Builder("x").ev("b", "CONNECT_REQUEST", "b:2", 1, listen_id="b:1")
    b.act("b", "reject", "b:2", 2).ev("b", "DISCONNECTED", "b:2", 3)
    breaks(b.build(), SIW, "no-event-before-accept", "never accepted")


@pytest.mark.parametrize(
    "result, ok", [("ECONNRESET", True), (-errno.ECONNRESET, True), ("EINVAL", False)]
)
def test_accept_may_fail_only_with_econnreset(result: str | int, ok: bool) -> None:
    b = Builder("x").ev("b", "CONNECT_REQUEST", "b:2", 1, listen_id="b:1")
    b.act("b", "accept", "b:2", 2, result)
    if ok:
        assert not _run(b.build(), SIW, "no-event-before-accept")
    else:
        breaks(b.build(), SIW, "no-event-before-accept", "failed with EINVAL, not ECONNRESET")


def test_no_event_after_destroy() -> None:
    b = connected()
    b.act("a", "destroy", "a:1", 100, duration_ms=1)
    b.ev("a", "DISCONNECTED", "a:1", 100.5)  # during the destroy call: allowed
    assert not _run(b.build(), SIW, "no-event-after-destroy")
    b.ev("a", "DISCONNECTED", "a:1", 102)
    breaks(b.build(), SIW, "no-event-after-destroy", "after its destroy returned")


def test_an_event_on_an_unmapped_id_breaks_no_event_after_destroy() -> None:
    """The agent names a destroyed id's late event by its old handle, or gives no id at all."""
    b = Builder("x").act("a", "connect", "a:1", 0).act("a", "destroy", "a:1", 5, duration_ms=1)
    b.ev("a", "CONNECT_ERROR", "a:1", 7, status=-22)  # named by the handle it had
    breaks(b.build(), SIW, "no-event-after-destroy", "events for a:1 after its destroy")
    b = Builder("x").act("a", "connect", "a:1", 0).ev("a", "CONNECT_ERROR", "", 7, status=-22)
    breaks(b.build(), SIW, "no-event-after-destroy", "an id the channel does not know")


def test_no_connect_request_through_a_destroyed_listener() -> None:
    b = Builder("x").act("b", "listen", "b:1", 0).act("b", "destroy", "b:1", 5, duration_ms=1)
    b.ev("b", "CONNECT_REQUEST", "b:7", 9, listen_id="b:1")
    breaks(b.build(), SIW, "no-event-after-destroy", "events for b:1")


def test_listener_destroy_conforming() -> None:
    conforms(listener_destroyed(), SIW)


def test_listener_destroy_pending_must_be_rejected() -> None:
    breaks(
        listener_destroyed(pending_reply="ESTABLISHED"),
        SIW,
        "listener-destroy-rejects-pending",
        "a:3 was pending on listener b:1",
    )


def test_listener_destroy_keeps_accepted() -> None:
    breaks(
        listener_destroyed(accepted_lost=True),
        SIW,
        "listener-destroy-rejects-pending",
        "accepted b:2 was disconnected",
    )


@pytest.mark.parametrize(
    "profile, ms, ok",
    [(SIW, 9_900, True), (SIW, 20_000, False), (IW_CXGB4, 20_000, True), (IW_CXGB4, 70_000, False)],
    ids=["siw-10s", "siw-20s", "cxgb4-20s", "cxgb4-70s"],
)
def test_destroy_in_conn_sent_bounded(profile: Profile, ms: float, ok: bool) -> None:
    tl = destroy_in_conn_sent(ms)
    if ok:
        conforms(tl, profile)
    else:
        breaks(tl, profile, "destroy-in-conn-sent-bounded", "in CONN_SENT blocked")


def test_destroy_in_conn_sent_must_be_measured_and_succeed() -> None:
    breaks(destroy_in_conn_sent(None), SIW, "destroy-in-conn-sent-bounded", "no measured duration")
    breaks(destroy_in_conn_sent(5, "EBUSY"), SIW, "destroy-in-conn-sent-bounded", "failed: EBUSY")


def test_destroy_in_conn_sent_that_does_not_wait_breaks_its_lower_bound() -> None:
    """The peer never answered, yet the destroy returned long before siw's MPA timer."""
    breaks(
        destroy_in_conn_sent(5),
        SIW,
        "destroy-in-conn-sent-bounded",
        "returned 14.0 ms after its connect, before the connect timeout",
    )
    conforms(destroy_in_conn_sent(5), IW_CXGB4)  # no lower bound known for cxgb4


@pytest.mark.parametrize("answer", ["accept", "reject", "destroy"])
def test_destroy_in_conn_sent_may_return_early_once_the_peer_answered(answer: str) -> None:
    b = Builder("destroy-racing-reply")
    b.act("b", "listen", "b:1", 0, backlog=8)
    b.act("a", "connect", "a:1", 1, listener=True)
    b.ev("b", "CONNECT_REQUEST", "b:2", 3, listen_id="b:1")
    b.act("a", "destroy", "a:1", 4, duration_ms=3)
    b.act("b", answer, "b:2", 5)
    assert not _run(b.build(), SIW, "destroy-in-conn-sent-bounded")


def test_listener_destroy_bounded() -> None:
    conforms(listener_destroyed(), SIW)
    slow = listener_destroyed(destroy_ms=2_500)
    breaks(slow, SIW, "listener-destroy-bounded", "blocked 2500.0 ms, over 2000.0 ms (1 requests")
    assert not _run(slow, IW_CXGB4, "listener-destroy-bounded")  # the firmware may take 60 s
    failed = listener_destroyed(destroy_result="EBUSY")
    breaks(failed, SIW, "listener-destroy-bounded", "destroy of listener b:1 failed: EBUSY")


@pytest.mark.parametrize("state", ["absent", "RTS"])
def test_qp_err_until_close(state: str) -> None:
    """After the peer's abort the surviving id's QP must be held in ERR until destroyed."""
    b = connected("iw_cxgb4")
    b.act("a", "qp_err", "a:1", 100).ev("a", "DISCONNECTED", "a:1", 101, -errno.ECONNRESET)
    b.ev("b", "DISCONNECTED", "b:2", 103, -errno.ECONNRESET)
    b.act("b", "qp_state", "b:2", 200, duration_ms=50, qpn=7, state="ERR")
    b.act("a", "qp_state", "a:1", 200, duration_ms=50, qpn=3, state="ERR")
    assert not _run(b.build(), IW_CXGB4, "qp-err-until-close")
    b.act("b", "qp_state", "b:2", 300, duration_ms=50, qpn=7, state=state)
    what = "is gone" if state == "absent" else "is in RTS"
    rule = "qp-err-until-close"
    breaks(b.build(), IW_CXGB4, rule, f"QP 7 of b:2 {what} after the abortive close")


def test_siw_reports_no_qp_state_so_only_a_qp_gone_breaks_qp_err_until_close() -> None:
    b = connected()
    b.act("a", "qp_err", "a:1", 100).ev("a", "DISCONNECTED", "a:1", 101)
    b.ev("b", "DISCONNECTED", "b:2", 103)
    b.act("b", "qp_state", "b:2", 200, duration_ms=50, qpn=1, state="RESET")  # as siw shows
    conforms(b.build(), SIW)
    b.act("a", "qp_state", "a:1", 200, duration_ms=50, qpn=1, state="absent")
    breaks(b.build(), SIW, "qp-err-until-close", "QP 1 of a:1 is gone after the abortive close")


def test_qp_state_before_an_abort_or_after_the_destroy_is_not_judged() -> None:
    b = connected()
    b.act("b", "qp_state", "b:2", 90, duration_ms=50, qpn=7, state="RTS")  # still connected
    b.act("a", "destroy", "a:1", 100, duration_ms=5)
    b.act("a", "qp_state", "a:1", 200, duration_ms=50, qpn=3, state="absent")  # destroyed
    assert not _run(b.build(), SIW, "qp-err-until-close")


@pytest.mark.parametrize("answer", ["accept", "reject"])
def test_an_answer_on_a_closed_id_fails_with_einval(answer: str) -> None:
    b = orderly_close_builder()
    b.act("b", answer, "b:2", 150, "EINVAL")  # after its DISCONNECTED at 103
    assert not _run(b.build(), SIW, "answer-on-closed-id-fails")
    assert not _run(b.build(), SIW, "no-event-before-accept")  # not a request's answer
    b.act("b", answer, "b:2", 160)
    breaks(b.build(), SIW, "answer-on-closed-id-fails", f"{answer} on b:2, closed, succeeded")
    b = orderly_close_builder()
    b.act("b", answer, "b:2", 150, "EBADF")
    breaks(b.build(), SIW, "answer-on-closed-id-fails", "failed with EBADF: expected EINVAL")


def test_a_second_answer_to_a_request_fails() -> None:
    b = connected()  # b:2 accepted at connect
    b.act("b", "reject", "b:2", 50)
    breaks(b.build(), SIW, "answer-on-closed-id-fails", "reject on b:2, answered already")


@pytest.mark.parametrize("result", ["ok", "EINVAL"])
def test_an_accept_after_the_peer_gave_up_fails_econnreset(result: str) -> None:
    b = Builder("accept-after-abort")
    b.act("b", "listen", "b:1", 0, backlog=8)
    b.act("a", "connect", "a:1", 1, listener=True)
    b.ev("a", "ADDR_RESOLVED", "a:1", 0.5)
    b.ev("b", "CONNECT_REQUEST", "b:2", 3, listen_id="b:1")
    b.act("a", "destroy", "a:1", 10, duration_ms=10_000)  # the MPA timer: 10 s
    b.act("b", "accept", "b:2", 11_500, "ECONNRESET")
    conforms(b.build(), SIW)
    b.actions[-1] = replace(b.actions[-1], result=result)
    got = "succeeded" if result == "ok" else "failed with EINVAL"
    breaks(b.build(), SIW, "accept-after-peer-abort-fails", f"accept on b:2 {got} after its peer")


def test_an_accept_right_after_the_peers_destroy_is_not_judged() -> None:
    b = Builder("accept-racing-abort")
    b.act("b", "listen", "b:1", 0, backlog=8)
    b.act("a", "connect", "a:1", 1, listener=True)
    b.ev("a", "ADDR_RESOLVED", "a:1", 0.5)
    b.ev("b", "CONNECT_REQUEST", "b:2", 3, listen_id="b:1")
    b.act("a", "destroy", "a:1", 10, duration_ms=10_000)
    b.act("b", "accept", "b:2", 10_200)  # the close may not have arrived yet
    assert not _run(b.build(), SIW, "accept-after-peer-abort-fails")


def test_disconnect_idempotent() -> None:
    b = connected()
    b.act("a", "disconnect", "a:1", 100).ev("a", "DISCONNECTED", "a:1", 101)
    b.ev("b", "DISCONNECTED", "b:2", 102)
    b.act("a", "disconnect", "a:1", 110)
    conforms(b.build(), SIW)
    b.act("a", "disconnect", "a:1", 120, "EINVAL")
    breaks(b.build(), SIW, "disconnect-idempotent", "repeated rdma_disconnect on a:1 failed")


def test_fifo_host_stamps_go_back() -> None:
    tl = orderly_close()
    a_events = [e for e in tl.events if e.side == "a"]
    # a:1's ROUTE_RESOLVED delivered last on a's channel: its stamp is older
    moved = tuple(replace(e, seq=99) if e is a_events[1] else e for e in tl.events)
    breaks(replace(tl, events=moved), SIW, "fifo-per-channel", "stamped before the previous one")


def test_fifo_two_channels_of_one_host_interleave_each_in_its_order() -> None:
    """Two endpoints used at once (a storm's processes): their events interleave in time,
    each channel's in its own order; only one channel going back breaks the rule."""
    tl = orderly_close()
    a_events = [e for e in tl.events if e.side == "a"]
    # a:1's ROUTE_RESOLVED came on another channel (endpoint 2) of the same host, first.
    other = tuple(replace(e, seq=2_000_001) if e is a_events[1] else e for e in tl.events)
    assert not _run(replace(tl, events=other), SIW, "fifo-per-channel")


def test_fifo_life_order_per_id() -> None:
    b = Builder("x").act("a", "connect", "a:1", 0)
    b.ev("a", "ROUTE_RESOLVED", "a:1", 1).ev("a", "ADDR_RESOLVED", "a:1", 2)
    b.ev("a", "ESTABLISHED", "a:1", 3)
    breaks(b.build(), SIW, "fifo-per-channel", "a:1 got ADDR_RESOLVED after ROUTE_RESOLVED")


def test_reject_conforms() -> None:
    conforms(rejected(), SIW)
