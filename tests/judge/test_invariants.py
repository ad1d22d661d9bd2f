"""Invariants 1, 2, 5-7 (destroy) and 10: each rule fails on a violating timeline, not a good one.

Invariant 4 (answering a request) is in test_answers.py, 3, 7 and 9 (closing) in test_closes.py.
"""

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
from contractcheck import breaks, conforms, violations

from hil.judge.profiles import IW_CXGB4, SIW, Profile


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
    assert not [v for v in violations(tl, IW_CXGB4, "connect-ends-once")]


def test_no_ib_only_events() -> None:
    b = connected()
    b.ev("a", "TIMEWAIT_EXIT", "a:1", 50)
    breaks(b.build(), SIW, "no-ib-only-events", "InfiniBand-only")


def test_no_event_after_destroy() -> None:
    b = connected()
    b.act("a", "destroy", "a:1", 100, duration_ms=1)
    b.ev("a", "DISCONNECTED", "a:1", 100.5)  # during the destroy call: allowed
    assert not violations(b.build(), SIW, "no-event-after-destroy")
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


def test_a_request_pending_for_seconds_is_pending_on_its_own_listener_only() -> None:
    # A destroy_listen sweep (a listener a round, each on its own port): the 6.12
    # listener left a:2 unanswered until the initiator's MPA timer, 10 s, during which
    # the later rounds' listeners were destroyed too.  One finding, on port 7001's.
    b = Builder("race-destroy-listen-vs-request")
    b.act("b", "listen", "b:1", 0, port=7001).act("b", "listen", "b:5", 0, port=7002)
    b.act("a", "connect", "a:2", 20, port=7001).act("b", "destroy", "b:1", 25, duration_ms=1)
    b.act("b", "destroy", "b:5", 60, duration_ms=1)
    b.ev("a", "UNREACHABLE", "a:2", 10_020, -errno.ETIMEDOUT, conn="c9")
    found = violations(b.build(), SIW, "listener-destroy-rejects-pending")
    assert [f.message for f in found] == [
        "a:2 was pending on listener b:1 when it was destroyed but got UNREACHABLE, not REJECTED"
    ]


def test_listener_destroy_keeps_accepted() -> None:
    breaks(
        listener_destroyed(accepted_lost=True),
        SIW,
        "listener-destroy-rejects-pending",
        "accepted b:2 was disconnected",
    )


def test_the_tests_own_close_after_it_does_not_excuse_an_accepted_id_the_destroy_closed() -> None:
    """The destroy closed the accepted c1 (DISCONNECTED at 34 ms); the test's own close at
    400 ms then succeeds on an id already closed (rdma_disconnect is idempotent)."""
    breaks(
        listener_destroyed(accepted_lost=True, own_close_ms=400),
        SIW,
        "listener-destroy-rejects-pending",
        "accepted b:2 was disconnected when listener b:1 was destroyed",
    )


def test_an_accepted_id_the_test_closed_after_the_listener_destroy_is_not_lost() -> None:
    tl = listener_destroyed(accepted_lost=True, own_close_ms=33)
    assert violations(tl, SIW, "listener-destroy-rejects-pending") == ()


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
    assert not violations(b.build(), SIW, "destroy-in-conn-sent-bounded")


def test_listener_destroy_bounded() -> None:
    conforms(listener_destroyed(), SIW)
    slow = listener_destroyed(destroy_ms=2_500)
    over = f"blocked 2500.0 ms, over {SIW.listener_destroy_bound_s * 1e3:.1f} ms (1 requests"
    breaks(slow, SIW, "listener-destroy-bounded", over)
    assert not violations(slow, IW_CXGB4, "listener-destroy-bounded")  # the firmware may take 60 s
    failed = listener_destroyed(destroy_result="EBUSY")
    breaks(failed, SIW, "listener-destroy-bounded", "destroy of listener b:1 failed: EBUSY")


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
    assert not violations(replace(tl, events=other), SIW, "fifo-per-channel")


def test_fifo_life_order_per_id() -> None:
    b = Builder("x").act("a", "connect", "a:1", 0)
    b.ev("a", "ROUTE_RESOLVED", "a:1", 1).ev("a", "ADDR_RESOLVED", "a:1", 2)
    b.ev("a", "ESTABLISHED", "a:1", 3)
    breaks(b.build(), SIW, "fifo-per-channel", "a:1 got ADDR_RESOLVED after ROUTE_RESOLVED")


def test_reject_conforms() -> None:
    conforms(rejected(), SIW)
