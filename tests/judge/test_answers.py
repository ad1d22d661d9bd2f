"""Invariant 4, answering a request: each rule fails on a hand-built violating timeline."""

from __future__ import annotations

import errno
from dataclasses import replace

import pytest
from cmtimelines import Builder, connected
from contractcheck import breaks, conforms, violations

from hil.judge.profiles import SIW


def orderly_close_builder() -> Builder:
    """c1 closed by a's rdma_disconnect: DISCONNECTED on a at 101, on b at 103."""
    b = connected()
    b.act("a", "disconnect", "a:1", 100).ev("a", "DISCONNECTED", "a:1", 101)
    return b.ev("b", "DISCONNECTED", "b:2", 103)


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
        assert not violations(b.build(), SIW, "no-event-before-accept")
    else:
        breaks(b.build(), SIW, "no-event-before-accept", "failed with EINVAL, not ECONNRESET")


def test_an_accept_refusing_private_data_past_the_limit_is_no_early_failure() -> None:
    """pdata-over-limit-refused judges that refusal; within the limit EINVAL still breaks."""
    for length, ok in ((SIW.private_data.accept + 1, True), (SIW.private_data.accept, False)):
        b = Builder("x").ev("b", "CONNECT_REQUEST", "b:2", 1, listen_id="b:1")
        b.act("b", "accept", "b:2", 2, "EINVAL", private_data=bytes(length).hex())
        assert bool(violations(b.build(), SIW, "no-event-before-accept")) is not ok


@pytest.mark.parametrize("answer", ["accept", "reject"])
def test_an_answer_on_a_closed_id_fails_with_einval(answer: str) -> None:
    b = orderly_close_builder()
    b.act("b", answer, "b:2", 150, "EINVAL")  # after its DISCONNECTED at 103
    assert not violations(b.build(), SIW, "answer-on-closed-id-fails")
    assert not violations(b.build(), SIW, "no-event-before-accept")  # not a request's answer
    b.act("b", answer, "b:2", 160)
    breaks(b.build(), SIW, "answer-on-closed-id-fails", f"{answer} on b:2, closed, succeeded")
    b = orderly_close_builder()
    b.act("b", answer, "b:2", 150, "EBADF")
    breaks(b.build(), SIW, "answer-on-closed-id-fails", "failed with EBADF: expected EINVAL")


@pytest.mark.parametrize("answer", ["accept", "reject"])
def test_an_answer_with_private_data_on_a_closed_id_is_refused_for_its_state(answer: str) -> None:
    """Its EINVAL is answer-on-closed-id-fails's, not a private data refusal (the
    disconnect-twice suite test rejects with 8 bytes after its close)."""
    b = orderly_close_builder()
    b.act("b", answer, "b:2", 150, "EINVAL", private_data=bytes(8).hex())
    assert not violations(b.build(), SIW, "pdata-over-limit-refused")
    assert not violations(b.build(), SIW, "answer-on-closed-id-fails")
    b = Builder("x").ev("b", "CONNECT_REQUEST", "b:2", 1, listen_id="b:1")
    b.act("b", answer, "b:2", 2, "EINVAL", private_data=bytes(8).hex())
    breaks(b.build(), SIW, "pdata-over-limit-refused", "within the limit 251, was refused EINVAL")


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
    assert not violations(b.build(), SIW, "accept-after-peer-abort-fails")
