"""Per-host judging: a pair whose hosts have different profiles (a mixed pair, or two
iw_cxgb4 hosts with different ``ep_timeout_secs``).

An event is judged by the profile of the host that reported it, a bound on
an action by the profile of the host that acted; the same timeline passes
with the profiles one way round and breaks the rule the other way round.
"""

from __future__ import annotations

import errno

import pytest
from cmtimelines import (
    HOSTS,
    Builder,
    close_with_peer_status,
    connected,
    orderly_close,
    qp_err_close,
    rejected,
)
from contractcheck import breaks, conforms

from hil.errors import InputError
from hil.judge.contract import check
from hil.judge.profiles import (
    IW_CXGB4,
    SIW,
    PairProfile,
    Profile,
    cxgb4_profile,
    pair_profile,
    siw_profile,
)


def pair(a: Profile, b: Profile) -> PairProfile:
    """Host A (lab-a, side a) judged by ``a``, host B by ``b``."""
    return PairProfile(((HOSTS["a"], a), (HOSTS["b"], b)))


SIW_A = pair(SIW, IW_CXGB4)  # siw on the active host, iw_cxgb4 on the passive one
CXGB4_A = pair(IW_CXGB4, SIW)


def test_a_pair_profile_answers_each_host_and_names_both() -> None:
    assert SIW_A.of("lab-a") is SIW and SIW_A.of("lab-b") is IW_CXGB4
    assert SIW_A.name == "siw+iw_cxgb4" and CXGB4_A.name == "iw_cxgb4+siw"
    assert pair(cxgb4_profile(10), cxgb4_profile(60)).name == "iw_cxgb4"
    assert SIW.of("any host") is SIW
    with pytest.raises(InputError, match="no contract profile for host 'lab-c'.*lab-a and lab-b"):
        SIW_A.of("lab-c")


def test_two_hosts_with_the_same_profile_get_a_plain_one() -> None:
    assert pair_profile((("a", siw_profile(5)), ("b", siw_profile(5)))) == siw_profile(5)
    mixed = pair_profile((("a", SIW), ("b", IW_CXGB4)))
    assert isinstance(mixed, PairProfile) and mixed.of("b") is IW_CXGB4


def test_the_verdict_names_the_mixed_profile() -> None:
    verdict = check(orderly_close("siw+iw_cxgb4"), SIW_A)
    assert verdict.ok, verdict.to_text()
    assert verdict.profile == "siw+iw_cxgb4" and "profile siw+iw_cxgb4" in verdict.to_text()


def test_a_status_valid_only_on_the_iw_cxgb4_side_is_judged_on_each_side() -> None:
    # b's DISCONNECTED(-ETIMEDOUT): iw_cxgb4's close when the peer's FIN did not come in
    # ep_timeout_secs; siw never reports it.
    tl = close_with_peer_status("siw+iw_cxgb4", -errno.ETIMEDOUT)
    conforms(tl, SIW_A)
    breaks(tl, CXGB4_A, "close-status", "peer got DISCONNECTED(-110), expected one of [0]")


def test_rejected_is_judged_by_the_active_hosts_profile() -> None:
    siw_status = rejected("siw+iw_cxgb4", status=-errno.ECONNRESET)
    conforms(siw_status, SIW_A)
    breaks(siw_status, CXGB4_A, "reject-status", "expected REJECTED(-111)")
    conforms(rejected("iw_cxgb4+siw", status=-errno.ECONNREFUSED), CXGB4_A)


def test_the_peer_of_a_siw_abort_may_look_orderly_to_an_iw_cxgb4_host() -> None:
    # siw's abort may be a FIN-only close: its iw_cxgb4 peer then sees an orderly close.
    conforms(qp_err_close("siw+iw_cxgb4", local=0, peer=0), SIW_A)
    conforms(qp_err_close("siw+iw_cxgb4", local=0, peer=-errno.ECONNRESET), SIW_A)
    # An iw_cxgb4 abort is a RST: its own DISCONNECTED is -ECONNRESET, a siw peer says 0.
    conforms(qp_err_close("iw_cxgb4+siw", local=-errno.ECONNRESET, peer=0), CXGB4_A)
    breaks(
        qp_err_close("iw_cxgb4+siw", local=0, peer=0),
        CXGB4_A,
        "close-status",
        "initiator got DISCONNECTED(0), expected one of [-104]",
    )


def test_the_connecting_host_decides_whether_a_second_connect_request_is_allowed() -> None:
    b = Builder("connect", "mixed")
    b.act("b", "listen", "b:1", 0, backlog=8)
    b.act("a", "connect", "a:1", 1, listener=True)
    b.ev("b", "CONNECT_REQUEST", "b:2", 3, listen_id="b:1")  # MPA v2, RST
    b.ev("b", "CONNECT_REQUEST", "b:3", 5, listen_id="b:1")  # cxgb4's MPA v1 retry
    b.act("a", "destroy", "a:1", 10, duration_ms=1)
    tl = b.build()
    assert check(tl, CXGB4_A, ["connect-ends-once"]).ok
    breaks(tl, SIW_A, "connect-ends-once", "under the profile of lab-a, which connected")


def test_a_write_completion_is_judged_by_the_writers_profile() -> None:
    b = connected("mixed")
    b.scenario = "remote-access"
    b.act("a", "write", "a:1", 50, how="bad_rkey", wc_status=5, wc_status_name="FLUSH_ERR")
    b.ev("a", "DISCONNECTED", "a:1", 60, -errno.ECONNRESET)
    b.ev("b", "DISCONNECTED", "b:2", 61, 0)
    tl = b.build()
    rule = "remote-access-error-completes-and-disconnects"
    assert check(tl, CXGB4_A, [rule]).ok
    breaks(tl, SIW_A, rule, "completed with FLUSH_ERR(5)")


@pytest.mark.parametrize("ep_timeout, ok", [(10, False), (60, True)])
def test_an_iw_cxgb4_close_is_bounded_by_the_closing_hosts_ep_timeout(
    ep_timeout: int, ok: bool
) -> None:
    # A's DISCONNECTED 20 s after its rdma_disconnect; B's ep_timeout_secs is the other one.
    other = 70 - ep_timeout
    tl = orderly_close("iw_cxgb4", local_ms=20_000)
    profiles = pair(cxgb4_profile(ep_timeout), cxgb4_profile(other))
    if ok:
        conforms(tl, profiles)
    else:
        breaks(tl, profiles, "disconnect-completes-within", "bound 15000.0 ms")


@pytest.mark.parametrize("ep_timeout, ok", [(10, False), (60, True)])
def test_a_destroy_in_conn_sent_is_bounded_by_the_destroying_hosts_ep_timeout(
    ep_timeout: int, ok: bool
) -> None:
    b = Builder("destroy-during-connect", "iw_cxgb4")
    b.act("b", "listen", "b:1", 0, backlog=8)
    b.act("a", "connect", "a:1", 1, listener=True)
    b.ev("b", "CONNECT_REQUEST", "b:2", 3, listen_id="b:1")
    b.act("a", "destroy", "a:1", 10, duration_ms=16_000)
    tl = b.build()
    profiles = pair(cxgb4_profile(ep_timeout), cxgb4_profile(70 - ep_timeout))
    verdict = check(tl, profiles, ["destroy-in-conn-sent-bounded"])
    assert verdict.ok is ok, verdict.to_text()


def test_a_mixed_pairs_link_pull_bound_is_the_later_of_the_hosts_promises() -> None:
    short, long = siw_profile(5), cxgb4_profile(60)
    profiles = pair(short, long)
    assert profiles.link_pull_bound_s("carrier", traffic=True) == max(
        short.pull_traffic_bound_s or 0, long.pull_traffic_bound_s or 0
    )
    assert profiles.link_pull_bound_s("carrier", traffic=False) is None
    # siw promises a bound for an admin pull, iw_cxgb4 treats it as a carrier loss.
    assert profiles.link_pull_bound_s("admin", traffic=False) == SIW.admin_down_bound_s
