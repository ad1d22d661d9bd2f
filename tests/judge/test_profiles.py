"""Provider profiles: selection, the TCP retransmission model, link-pull bounds."""

from __future__ import annotations

import errno

import pytest

from hil.errors import InputError
from hil.judge.profiles import IW_CXGB4, SIW, profile_for, tcp_retries2_timeout_s


@pytest.mark.parametrize(
    "driver, profile", [("siw", SIW), ("iw_cxgb4", IW_CXGB4), ("cxgb4", IW_CXGB4)]
)
def test_profile_for_driver(driver: str, profile: object) -> None:
    assert profile_for(driver) is profile


def test_unknown_driver_is_input_error_naming_known_ones() -> None:
    with pytest.raises(InputError, match="rxe.*known: irdma, iw_cxgb4, siw"):
        profile_for("rxe")


def test_profiles_differ_where_the_contract_note_says() -> None:
    assert SIW.reject_status == -errno.ECONNRESET
    assert IW_CXGB4.reject_status == -errno.ECONNREFUSED
    assert SIW.no_listener_connect_error and not IW_CXGB4.no_listener_connect_error
    assert IW_CXGB4.mpa_v1_retry and not SIW.mpa_v1_retry
    assert IW_CXGB4.disconnected_means_tcp_down and not SIW.disconnected_means_tcp_down
    assert SIW.peer_abort_statuses() == {0}
    assert IW_CXGB4.peer_abort_statuses() == {-errno.ECONNRESET}


@pytest.mark.parametrize("retries2, seconds", [(0, 0.2), (5, 12.6), (9, 204.6), (15, 924.6)])
def test_tcp_retries2_model_matches_kernel(retries2: int, seconds: float) -> None:
    assert tcp_retries2_timeout_s(retries2) == pytest.approx(seconds)


def test_negative_retries2_is_input_error() -> None:
    with pytest.raises(InputError, match="tcp_retries2"):
        tcp_retries2_timeout_s(-1)


def test_siw_link_pull_bound_follows_tcp_retries2() -> None:
    lab = profile_for("siw", tcp_retries2=5)
    bound = lab.link_pull_bound_s("carrier", traffic=True)
    assert bound is not None and 12.6 < bound < 30
    assert lab.link_pull_bound_s("carrier", traffic=False) is None
    assert lab.link_pull_bound_s("admin", traffic=False) == SIW.admin_down_bound_s


def test_cxgb4_bounds_follow_ep_timeout() -> None:
    short = profile_for("iw_cxgb4", ep_timeout_secs=10)
    assert short.conn_sent_destroy_bound_s < IW_CXGB4.conn_sent_destroy_bound_s
    assert short.link_pull_bound_s("admin", traffic=True) == short.pull_traffic_bound_s
