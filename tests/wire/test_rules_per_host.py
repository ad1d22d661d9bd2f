"""Wire rules on a pair of two profiles: a frame is judged by its sender's expectations.

tests/data/wire/mpa-bad-flags.pcap: host-b's MPA reply is revision 1 with the marker
and CRC flags set.  iw_cxgb4 may send revision 1 (its MPA v1 retry) and has no pinned
CRC flag; siw sends revision 2 without CRC; neither uses markers.  abort-qp_err-siw:
siw's FIN-only abortive close, judged by the expectations of the host that closed.
"""

from __future__ import annotations

from test_rules_captures import connected_and_closed, decoded, only
from test_rules_siw_captures import failure, recorded_as, statuses

from hil.judge.profiles import IW_CXGB4, SIW, PairProfile
from hil.wire.judge import judge
from hil.wire.rule import Outcome

RULE = "mpa-revision-and-flags"


def _outcome(profile: PairProfile, timeline_known: bool = True) -> Outcome:
    ex = decoded("mpa-bad-flags")
    timelines = [connected_and_closed(only(ex))] if timeline_known else []
    verdict = judge(ex, timelines, profile, timeline_known=timeline_known)
    assert verdict.profile == profile.name
    return next(r.outcome for r in verdict.results if r.rule == RULE)


def _text(outcome: Outcome) -> str:
    assert outcome.status == "fail", outcome
    return "\n".join(f.to_text() for f in outcome.findings)


def test_the_reply_of_an_iw_cxgb4_host_may_be_revision_1_but_never_carry_markers() -> None:
    text = _text(_outcome(PairProfile((("host-a", SIW), ("host-b", IW_CXGB4)))))
    assert "MPA reply: marker flag set" in text
    assert "revision" not in text and "CRC" not in text


def test_the_same_reply_from_a_siw_host_breaks_revision_and_crc_too() -> None:
    text = _text(_outcome(PairProfile((("host-a", IW_CXGB4), ("host-b", SIW)))))
    assert "MPA reply: revision 1 (expected [2])" in text and "CRC flag 1 (expected 0)" in text


def test_with_no_timeline_a_frame_passes_what_one_hosts_expectations_allow() -> None:
    # Which host sent the reply is unknown: iw_cxgb4's expectations allow all but the marker.
    text = _text(_outcome(PairProfile((("host-a", IW_CXGB4), ("host-b", SIW))), False))
    assert "marker flag set" in text and "revision" not in text


def test_an_abortive_close_is_judged_by_the_expectations_of_the_host_that_closed() -> None:
    # siw's QP-to-ERR on lab1dd2-0 is a FIN-only close: what siw may do, never iw_cxgb4.
    a, b = "lab1dd2-0", "lab1dd2-1"
    rule = "abortive-close-on-the-wire"
    _, siw_closed = recorded_as("abort-qp_err-siw", PairProfile(((a, SIW), (b, IW_CXGB4))))  # type: ignore[arg-type]
    assert statuses(siw_closed)[rule] == "pass", siw_closed.to_text()
    _, cxgb4_closed = recorded_as("abort-qp_err-siw", PairProfile(((a, IW_CXGB4), (b, SIW))))  # type: ignore[arg-type]
    assert "never a FIN-only close" in failure(cxgb4_closed, rule)
