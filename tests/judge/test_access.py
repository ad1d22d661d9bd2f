"""The remote access error rule: it fails a violating timeline and passes a good one."""

from __future__ import annotations

import errno

import pytest
from cmtimelines import Builder, connected
from contractcheck import breaks, conforms

from hil.judge.contract import check
from hil.judge.profiles import IW_CXGB4, SIW, Profile
from hil.judge.timeline import Timeline

RULE = "remote-access-error-completes-and-disconnects"
RESET = -errno.ECONNRESET
NAMES = {
    0: "IBV_WC_SUCCESS",
    2: "IBV_WC_LOC_QP_OP_ERR",
    5: "IBV_WC_WR_FLUSH_ERR",
    10: "IBV_WC_REM_ACCESS_ERR",
}


def refused_write(
    provider: str = "siw",
    how: str = "bad_rkey",
    wc_status: int | None = 0,
    statuses: tuple[int | None, int | None] = (0, 0),
) -> Builder:
    """Connect, a's WRITE to b refused (``wc_status`` None: no completion came), then the
    DISCONNECTED of a and b with ``statuses`` (None: none came), then both destroyed."""
    b = connected(provider)
    b.scenario = f"remote-access-{how}"
    done = {} if wc_status is None else {"wc_status": wc_status, "wc_status_name": NAMES[wc_status]}
    result = "ok" if wc_status is not None else "ETIMEDOUT"
    b.act("a", "write", "a:1", 100, result, 3, addr=4096, rkey=0x1FF, length=64, how=how, **done)
    for side, cm_id, t_ms, status in (
        ("b", "b:2", 102, statuses[1]),
        ("a", "a:1", 104, statuses[0]),
    ):
        if status is not None:
            b.ev(side, "DISCONNECTED", cm_id, t_ms, status)
    b.act("a", "destroy", "a:1", 200, duration_ms=0.1)
    b.act("b", "destroy", "b:2", 201, duration_ms=0.1)
    return b


def tl(**kw: object) -> Timeline:
    return refused_write(**kw).build()  # type: ignore[arg-type]


@pytest.mark.parametrize("how", ["bad_rkey", "past_end"])
def test_siw_as_measured_conforms(how: str) -> None:
    conforms(tl(how=how), SIW)


def test_cxgb4_may_flush_the_write_and_reset_the_connection() -> None:
    conforms(tl(provider="iw_cxgb4", wc_status=5, statuses=(RESET, 0)), IW_CXGB4)
    breaks(
        tl(wc_status=5), SIW, RULE, "completed with IBV_WC_WR_FLUSH_ERR(5), expected one of [0, 2]"
    )
    breaks(tl(statuses=(RESET, 0)), SIW, RULE, "side a got DISCONNECTED(-104), expected one of [0]")


def test_siw_may_fail_a_write_whose_rest_could_not_be_sent_after_the_terminate() -> None:
    # siw_qp_tx.c:1145-1163 (6.1.192): a WQE whose send fails completes LOC_QP_OP_ERR.
    conforms(tl(wc_status=2), SIW)


@pytest.mark.parametrize("profile", [SIW, IW_CXGB4], ids=["siw", "cxgb4"])
def test_a_completion_the_profile_does_not_name_breaks_it(profile: Profile) -> None:
    breaks(
        tl(provider=profile.name, wc_status=10),
        profile,
        RULE,
        "the bad_rkey RDMA WRITE on a:1 completed with IBV_WC_REM_ACCESS_ERR(10)",
    )


def test_a_write_without_completion_breaks_it() -> None:
    breaks(tl(wc_status=None), SIW, RULE, "the bad_rkey RDMA WRITE on a:1 got no completion")


@pytest.mark.parametrize("missing", [0, 1], ids=["writer", "peer"])
def test_each_side_must_disconnect(missing: int) -> None:
    statuses: list[int | None] = [0, 0]
    statuses[missing] = None
    side = "ab"[missing]
    breaks(tl(statuses=tuple(statuses)), SIW, RULE, f"side {side} got no DISCONNECTED")


def test_a_write_not_made_to_fail_is_not_judged_here() -> None:
    b = connected()
    b.act("a", "write", "a:1", 100, "ok", 3, addr=4096, rkey=0x100, length=64, wc_status=10)
    assert check(b.build(), SIW, rules=[RULE]).ok
