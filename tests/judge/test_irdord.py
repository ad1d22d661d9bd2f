"""The ``ird-ord-*`` rules on hand-made timelines: siw's negotiation passes; a request
reported wrong, an ESTABLISHED or QP off the negotiation, a call past the limit taken,
and a READ within the ORD that failed each break their rule."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from cmtimelines import Builder, orderly_close
from contractcheck import breaks, conforms, violations

from hil.judge.irdord import RULES
from hil.judge.profiles import IW_CXGB4, SIW
from hil.judge.timeline import Timeline

# (ird, ord) asked on connect and accept; what siw negotiates for each side, and what
# its events report as (responder_resources, initiator_depth): CONNECT_REQUEST the
# request mirrored, ESTABLISHED (initiator_depth, responder_resources) = (IRD, ORD).
ASKED = {"connect": (2, 4), "accept": (8, 1)}
ACTIVE, PASSIVE = (1, 8), (8, 1)  # (IRD, ORD) negotiated: siw_cm.c:1613-1628, 828-829


def words(
    request: tuple[int, int] = (4, 2),
    passive: tuple[int, int] = (PASSIVE[1], PASSIVE[0]),
    active: tuple[int, int] = (ACTIVE[1], ACTIVE[0]),
) -> dict[str, tuple[int, int]]:
    """The (responder_resources, initiator_depth) each event reports."""
    return {"CONNECT_REQUEST": request, "b:ESTABLISHED": passive, "a:ESTABLISHED": active}


def negotiated(
    reported: dict[str, tuple[int, int]] | None = None,
    connect: tuple[int, int] = ASKED["connect"],
    accept: tuple[int, int] = ASKED["accept"],
    extra: list[tuple[str, str, str, dict[str, Any]]] | None = None,
) -> Timeline:
    """c1 asking ``connect`` and accepted with ``accept``, its events reporting
    ``reported``, then ``extra`` actions (side, name, id, params) and the close."""
    reported = reported or words()
    b = Builder("ird-ord")
    b.act("b", "listen", "b:1", 0, backlog=8)
    b.act("a", "connect", "a:1", 1, ird=connect[0], ord=connect[1], private_data="")
    b.ev("a", "ADDR_RESOLVED", "a:1", 0.5)
    b.ev("b", "CONNECT_REQUEST", "b:2", 3, listen_id="b:1")
    b.act("b", "accept", "b:2", 4, ird=accept[0], ord=accept[1], private_data="")
    b.ev("b", "ESTABLISHED", "b:2", 6).ev("a", "ESTABLISHED", "a:1", 7)
    for i, (side, name, cm_id, params) in enumerate(extra or []):
        b.act(side, name, cm_id, 10 + i, params.pop("result", "ok"), **params)
    b.act("a", "disconnect", "a:1", 100)
    b.ev("a", "DISCONNECTED", "a:1", 101).ev("b", "DISCONNECTED", "b:2", 103)
    tl = b.build()
    events = tuple(_reporting(e, reported) for e in tl.events)
    return replace(tl, events=events)


def _reporting(e: Any, reported: dict[str, tuple[int, int]]) -> Any:
    got = reported.get(e.type) or reported.get(f"{e.side}:{e.type}")
    if got is None:
        return e
    return replace(e, responder_resources=got[0], initiator_depth=got[1])


def qp(side: str, cm_id: str, rd: int, dest: int) -> tuple[str, str, str, dict[str, Any]]:
    return side, "query_qp", cm_id, {"max_rd_atomic": rd, "max_dest_rd_atomic": dest}


def reads(count: int, ok: bool = True, **more: Any) -> tuple[str, str, str, dict[str, Any]]:
    check = {"op": "read", "size": 64, "ok": ok, "offset": -1 if ok else 3}
    check |= {"expected": -1 if ok else 1, "got": -1 if ok else 2}
    params = {"reader": True, "count": count, "checks": [check] * count, "error": None}
    return "a", "reads", "a:1", params | more


# siw's QPs: max_rd_atomic the IRD, max_dest_rd_atomic the ORD, rounded up (siw_verbs.c:520).
SOUND = [qp("a", "a:1", 1, 8), qp("b", "b:2", 8, 1), reads(8), reads(9)]


def test_siws_negotiation_reported_as_siw_reports_it_passes() -> None:
    conforms(negotiated(extra=[*SOUND]), SIW)


def test_the_rules_judge_nothing_where_the_profile_promises_nothing() -> None:
    tl = negotiated(words(request=(9, 9)), extra=[qp("a", "a:1", 0, 0)])
    for r in RULES:
        assert not violations(tl, IW_CXGB4, r.name), r.name


def test_events_without_the_words_and_old_timelines_are_not_judged() -> None:
    assert not [v for v in _all(negotiated({})) if v]
    assert not [v for v in _all(orderly_close()) if v]


def _all(tl: Timeline) -> list[object]:
    return [violations(tl, SIW, r.name) for r in RULES]


def test_a_connect_request_that_does_not_mirror_the_request_breaks_it() -> None:
    """The request reported unmirrored: IRD 2 / ORD 4 instead of IRD 4 / ORD 2."""
    breaks(
        negotiated(words(request=(2, 4))),
        SIW,
        "ird-ord-request-reported",
        "connection c1 (a lab-a -> b lab-b): CONNECT_REQUEST reports IRD 2 / ORD 4 "
        "(responder_resources 2, initiator_depth 4); the active side asked IRD 2 / ORD 4, "
        "so expected IRD 4 / ORD 2",
    )


def test_255_asks_for_the_maximum() -> None:
    tl = negotiated(words((128, 128), (128, 128), (128, 128)), (255, 255), (255, 255))
    assert not [v for v in _all(tl) if v]
    breaks(
        negotiated(words((255, 255), (128, 128), (128, 128)), (255, 255), (255, 255)),
        SIW,
        "ird-ord-request-reported",
        "expected IRD 128 / ORD 128",
    )


def test_an_initiator_taking_the_responders_words_unmirrored_breaks_it() -> None:
    """The mutant ird-ord-swapped: the active side ends with the passive side's own."""
    verdict = breaks(
        negotiated(words(active=(PASSIVE[1], PASSIVE[0]))),
        SIW,
        "ird-ord-negotiated",
        "side a's ESTABLISHED reports IRD 8 / ORD 1, the negotiation gives it IRD 1 / ORD 8 "
        "(asked: connect IRD 2 / ORD 4, accept IRD 8 / ORD 1)",
    )
    assert len(verdict.violations) == 1


def test_a_responder_that_keeps_an_ord_over_the_initiators_ird_breaks_it() -> None:
    """Not lowered: the passive side reports ORD 8 though the initiator's IRD is 2."""
    breaks(
        negotiated(words(passive=(8, 8)), accept=(8, 8)),
        SIW,
        "ird-ord-negotiated",
        "side b's ESTABLISHED reports IRD 8 / ORD 8, the negotiation gives it IRD 8 / ORD 2",
    )


@pytest.mark.parametrize("call", ["connect", "accept"])
def test_a_call_past_the_maximum_that_is_taken_breaks_it(call: str) -> None:
    b = Builder("ird-ord")
    b.act("a" if call == "connect" else "b", call, "x:1", 1, ird=129, ord=1)
    breaks(
        b.build(),
        SIW,
        "ird-ord-over-limit-refused",
        f"{call} asking IRD 129 (max 128) returned ok, expected EINVAL",
    )
    refused = Builder("ird-ord").act("a", call, "a:1", 1, "EINVAL", ird=1, ord=129)
    assert not violations(refused.build(), SIW, "ird-ord-over-limit-refused")


def test_a_qp_whose_depths_are_not_the_negotiated_ones_breaks_it() -> None:
    breaks(
        negotiated(extra=[qp("a", "a:1", 8, 1)]),
        SIW,
        "ird-ord-qp-depths",
        "side a (lab-a) a:1: the QP reports max_rd_atomic 8, max_dest_rd_atomic 1; "
        "negotiated IRD 1 / ORD 8, so expected 1 and 8",
    )


def test_the_qp_depths_are_rounded_up_to_a_power_of_two() -> None:
    tl = negotiated(words((2, 3), (3, 2), (2, 3)), (3, 2), (2, 3), extra=[qp("b", "b:2", 2, 4)])
    assert not violations(tl, SIW, "ird-ord-qp-depths")


def test_a_read_within_the_ord_that_came_back_wrong_breaks_it() -> None:
    breaks(
        negotiated(extra=[reads(8, ok=False)]),
        SIW,
        "ird-ord-reads",
        "side a (lab-a) a:1: 8 concurrent RDMA READs (negotiated ORD 8): READ 0 of 64 "
        "bytes: first bad byte at offset 3, expected 1, got 2",
    )


def test_reads_past_the_ord_are_judged_as_the_profile_says() -> None:
    stopped = reads(9, error="completion IBV_WC_REM_INV_REQ_ERR (wr 4)")
    breaks(
        negotiated(extra=[stopped]),
        SIW,
        "ird-ord-reads",
        "9 concurrent RDMA READs (negotiated ORD 8, 1 past the ORD): stopped: completion",
    )
    assert SIW.ird_ord is not None
    unjudged = replace(SIW, ird_ord=replace(SIW.ird_ord, reads_past_ord=None))
    assert not violations(negotiated(extra=[stopped]), unjudged, "ird-ord-reads")


def test_reads_that_did_not_run_or_checked_too_few_break_it() -> None:
    breaks(negotiated(extra=[reads(2, result="ETIMEDOUT")]), SIW, "ird-ord-reads", "ETIMEDOUT")
    short = reads(2)
    short[3]["checks"] = short[3]["checks"][:1]
    breaks(negotiated(extra=[short]), SIW, "ird-ord-reads", "checked 1 READs")
