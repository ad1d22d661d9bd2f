"""The unreachable rule: a connect made while the link drops every frame."""

from __future__ import annotations

from cmtimelines import PULLED, Builder, end
from contractcheck import breaks, conforms

from hil.judge.contract import check
from hil.judge.profiles import profile_for
from hil.judge.timeline import Timeline

LAB_SIW = profile_for("siw", tcp_retries2=5, tcp_syn_retries=3)  # unreachable within 18 s
CXGB4 = profile_for("iw_cxgb4", ep_timeout_secs=10)  # 25 s


def blackholed(
    result: str = "ETIMEDOUT",
    took_ms: float = 15_000,
    restore_ms: float = 16_000,
    reply: str | None = None,
    reply_ms: float = 0.0,
) -> Timeline:
    """The link pulled at 10 ms, a connect at 20 ms that ends ``result`` after ``took_ms``
    (and ``reply`` at ``reply_ms``), the link restored at ``restore_ms``."""
    b = Builder("unreachable-blackhole")
    b.act("b", "listen", "b:1", 0, backlog=8)
    b.act("b", "async_watch", None, 5, duration_ms=restore_ms + 1_000, events=[])
    b.act("b", "pull", None, 10, mode="carrier", method="blackhole", traffic=False)
    b.act("a", "connect", "a:1", 20, result, duration_ms=took_ms, listener=True)
    if reply:
        b.ev("a", "ADDR_RESOLVED", "a:1", 19)
        b.ev("a", reply, "a:1", reply_ms, -110)
    ends = [end("lab-a"), end("lab-b", PULLED["blackhole"])]
    b.act("b", "link_state", None, restore_ms - 100, phase="pulled", ends=ends)
    b.act("b", "restore", None, restore_ms, mode="carrier", method="blackhole")
    ends = [end("lab-a"), end("lab-b")]
    b.act("b", "link_state", None, restore_ms + 500, phase="restored", ends=ends)
    return b.build()


def test_siw_fails_rdma_connect_etimedout_within_the_syn_retries() -> None:
    conforms(blackholed(), LAB_SIW)
    rule = "unreachable-connect-ends"
    breaks(blackholed("ok", 5), LAB_SIW, rule, "returned ok, expected ETIMEDOUT (profile siw)")
    breaks(blackholed("ECONNREFUSED", 5), LAB_SIW, rule, "returned ECONNREFUSED")
    late = blackholed(took_ms=19_000, restore_ms=20_000)
    breaks(late, LAB_SIW, rule, "failed after 19000.0 ms, bound 18")


def test_a_connect_the_restore_may_have_let_through_is_not_judged() -> None:
    through = blackholed("ok", 5_000, restore_ms=3_000, reply="ESTABLISHED", reply_ms=5_100)
    assert not check(through, LAB_SIW, rules=["unreachable-connect-ends"]).violations


def test_cxgb4_reports_unreachable_as_an_event_within_its_bound() -> None:
    ok = blackholed("ok", 5, restore_ms=30_000, reply="UNREACHABLE", reply_ms=20_000)
    conforms(ok, CXGB4)
    rule = "unreachable-connect-ends"
    wrong = blackholed("ok", 5, restore_ms=30_000, reply="REJECTED", reply_ms=20_000)
    breaks(wrong, CXGB4, rule, "got REJECTED, expected one of UNREACHABLE")
    breaks(blackholed("ok", 5, restore_ms=40_000), CXGB4, rule, "no reply, bound 25")
    breaks(blackholed("ETIMEDOUT", 5, restore_ms=40_000), CXGB4, rule, "reports it as an event")
