"""Invariants 3, 7 and 9, closing: each rule fails on a hand-built violating timeline."""

from __future__ import annotations

import errno

import pytest
from cmtimelines import Builder, connected
from contractcheck import breaks, conforms, violations

from hil.judge.profiles import IW_CXGB4, SIW


def test_disconnect_once_twice() -> None:
    b = connected()
    b.ev("a", "DISCONNECTED", "a:1", 50).ev("a", "DISCONNECTED", "a:1", 51)
    breaks(b.build(), SIW, "disconnect-once-after-established", "a:1 got 2 DISCONNECTED")


def test_disconnect_once_without_established() -> None:
    b = Builder("x").ev("b", "CONNECT_REQUEST", "b:2", 1, listen_id="b:1")
    b.act("b", "accept", "b:2", 2).ev("b", "DISCONNECTED", "b:2", 3)
    breaks(b.build(), SIW, "disconnect-once-after-established", "without ESTABLISHED")


@pytest.mark.parametrize("state", ["absent", "RTS"])
def test_qp_err_until_close(state: str) -> None:
    """After the peer's abort the surviving id's QP must be held in ERR until destroyed."""
    b = connected("iw_cxgb4")
    b.act("a", "qp_err", "a:1", 100).ev("a", "DISCONNECTED", "a:1", 101, -errno.ECONNRESET)
    b.ev("b", "DISCONNECTED", "b:2", 103, -errno.ECONNRESET)
    b.act("b", "qp_state", "b:2", 200, duration_ms=50, qpn=7, state="ERR")
    b.act("a", "qp_state", "a:1", 200, duration_ms=50, qpn=3, state="ERR")
    assert not violations(b.build(), IW_CXGB4, "qp-err-until-close")
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
    assert not violations(b.build(), SIW, "qp-err-until-close")


def test_disconnect_idempotent() -> None:
    b = connected()
    b.act("a", "disconnect", "a:1", 100).ev("a", "DISCONNECTED", "a:1", 101)
    b.ev("b", "DISCONNECTED", "b:2", 102)
    b.act("a", "disconnect", "a:1", 110)
    conforms(b.build(), SIW)
    b.act("a", "disconnect", "a:1", 120, "EINVAL")
    breaks(b.build(), SIW, "disconnect-idempotent", "repeated rdma_disconnect on a:1 failed")
