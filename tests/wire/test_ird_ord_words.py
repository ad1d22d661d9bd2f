"""``mpa-ird-ord-words`` on hand-built exchanges: MPA v2 words that the events report
(the request mirrored in CONNECT_REQUEST, the reply in the passive ESTABLISHED and
mirrored in the active one, each as siw's profile reads them) pass; swapped words fail."""

from __future__ import annotations

from dataclasses import replace

from test_rules import connected, fin_close, handshake, run

from hil.judge.profiles import IW_CXGB4
from hil.judge.timeline import Action, Event
from hil.wire.model import Packet

RULE = "mpa-ird-ord-words"


def worded(request: tuple[int, int], reply: tuple[int, int]) -> list[Packet]:
    """The handshake with the request's and the reply's (IRD, ORD) words."""
    words = {"request": request, "reply": reply}
    return [
        replace(p, mpa=replace(p.mpa, ird=words[p.mpa.kind][0], ord=words[p.mpa.kind][1]))
        if p.mpa
        else p
        for p in handshake()
    ] + fin_close()


def reporting(active: tuple[int, int], passive: tuple[int, int]) -> list[Action | Event]:
    """The connected timeline, its events reporting siw's (responder_resources,
    initiator_depth) for a request IRD 2 / ORD 4 answered IRD 8 / ORD 1: CONNECT_REQUEST
    (4, 2); ESTABLISHED (ORD, IRD) of each side."""
    words = {"CONNECT_REQUEST": (4, 2), "a": active, "b": passive}
    out: list[Action | Event] = []
    for i in connected():
        if isinstance(i, Event):
            rr, idp = words["CONNECT_REQUEST"] if i.type == "CONNECT_REQUEST" else words[i.side]
            i = replace(i, responder_resources=rr, initiator_depth=idp)
        out.append(i)
    return out


def test_words_the_events_report_pass() -> None:
    got = run(worded((2, 4), (8, 1)), *reporting(active=(8, 1), passive=(1, 8)))[RULE]
    assert got.status == "pass" and got.reason == "2 judged", got


def test_reply_words_swapped_fail_naming_both_sides() -> None:
    """The mutant ird-ord-swapped: the reply carries IRD 1 / ORD 8; the passive side still
    reports its own IRD 8 / ORD 1, the active side the swapped words mirrored."""
    got = run(worded((2, 4), (1, 8)), *reporting(active=(1, 8), passive=(1, 8)))[RULE]
    assert got.status == "fail" and got.reason == "1 of 2 broken", got
    assert [f.message for f in got.findings] == [
        "MPA reply carries IRD 1 / ORD 8, but side b's ESTABLISHED reports IRD 8 / ORD 1 "
        "(expected 1 / 8)",
    ]
    assert got.findings[0].packets and "MPA reply" in got.findings[0].packets[0]


def test_request_words_other_than_the_connect_request_reports_fail() -> None:
    got = run(worded((4, 2), (8, 1)), *reporting(active=(8, 1), passive=(1, 8)))[RULE]
    assert got.status == "fail"
    assert got.findings[0].message.startswith(
        "MPA request carries IRD 4 / ORD 2, but side b's CONNECT_REQUEST reports IRD 4 / ORD 2"
    )


def test_nothing_is_judged_without_words_or_a_profile_promise() -> None:
    no_words = [
        replace(p, mpa=replace(p.mpa, ird=None, ord=None)) if p.mpa else p for p in handshake()
    ]
    assert run(no_words, *reporting((8, 1), (1, 8)))[RULE].status == "n/a"
    unpromised = run(worded((9, 9), (9, 9)), *reporting((8, 1), (1, 8)), profile=IW_CXGB4)
    assert unpromised[RULE].status == "n/a"
