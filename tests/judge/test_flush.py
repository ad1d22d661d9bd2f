"""``abort-flushes``: a posted request never completed, one completed twice, one never
posted and a wrong status each fail, naming the connection, the side and the wr."""

from __future__ import annotations

from typing import Any

import pytest
from cmtimelines import Builder, connected
from contractcheck import breaks, conforms, violations

from hil.judge.profiles import SIW

RULE = "abort-flushes"


def flushed(**params: Any) -> Builder:
    """c1 connected, its QP on a moved to ERR, both DISCONNECTED, then a's ``flushed``
    action (params: receives 1-3 posted, each flushed once, updated by ``params``)."""
    t = connected()
    t.scenario = "abort"
    t.act("a", "qp_err", "a:1", 100)
    t.ev("a", "DISCONNECTED", "a:1", 101)
    t.ev("b", "DISCONNECTED", "b:2", 104)
    done = [{"wr_id": w, "status": 5} for w in (1, 2, 3)]
    base: dict[str, Any] = {"posted": [1, 2, 3], "completions": done, "error": None}
    result = str(params.pop("result", "ok"))
    t.act("a", "flushed", "a:1", 110, result, 50, **{**base, **params})
    t.act("a", "destroy", "a:1", 200, duration_ms=0.1)
    t.act("b", "destroy", "b:2", 201, duration_ms=0.1)
    return t


def test_each_posted_request_flushed_once_passes_the_whole_contract() -> None:
    conforms(flushed().build(), SIW)


def test_a_request_that_completed_before_the_abort_with_success_passes() -> None:
    assert not violations(flushed(completions=wcs((1, 0), (2, 5), (3, 5))).build(), SIW, RULE)


STOP = "no completion within 10s for every posted work request"


def wcs(*pairs: tuple[int, int]) -> list[dict[str, int]]:
    """Completions from (wr_id, status) pairs."""
    return [{"wr_id": w, "status": st} for w, st in pairs]


@pytest.mark.parametrize(
    ("params", "says"),
    [
        (
            {"completions": wcs((1, 5), (2, 5), (2, 5), (3, 5))},
            "connection c1, side a (lab-a) a:1: wr 2 completed 2 times",
        ),
        (
            {"completions": wcs((1, 5)), "error": STOP},
            f"posted wr 2, 3 never completed ({STOP})",
        ),
        (
            {"completions": wcs((1, 5), (2, 5), (3, 5), (9, 5))},
            "wr 9 completed but was not posted",
        ),
        (
            {"completions": wcs((1, 12), (2, 5), (3, 5))},
            "wr 1 completed with status 12, not IBV_WC_WR_FLUSH_ERR (5) or success",
        ),
        ({"result": "EBADF"}, "the CQ was not drained: EBADF"),
    ],
    ids=["twice", "never completed", "never posted", "wrong status", "not run"],
)
def test_each_broken_flush_is_a_violation(params: dict[str, Any], says: str) -> None:
    breaks(flushed(**params).build(), SIW, RULE, says)
