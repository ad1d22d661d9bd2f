"""The profile type: a pulled link's promise, in seconds and in words (one host's
profile; a pair of two: test_per_host.py)."""

from __future__ import annotations

import pytest

from hil.errors import InputError
from hil.judge.profile import PairProfile
from hil.judge.profiles import SIW, profile_for


def test_unknown_pull_mode_is_input_error() -> None:
    with pytest.raises(InputError, match="pull mode"):
        SIW.link_pull_bound_s("unplug", traffic=True)


def test_a_link_pull_promise_says_what_it_promises_and_why() -> None:
    siw = profile_for("siw", tcp_retries2=5)
    idle = siw.link_pull_promise("carrier", traffic=False)
    assert idle.bound_s is None and str(idle).startswith("profile siw promises nothing: ")
    assert "keepalive" in idle.basis
    busy = siw.link_pull_promise("carrier", traffic=True)
    assert busy.bound_s == siw.link_pull_bound_s("carrier", True)
    assert "promises detection within" in str(busy) and "retransmission" in busy.basis
    assert siw.link_pull_promise("admin", traffic=False).bound_s == siw.admin_down_bound_s
    mixed = PairProfile((("a", siw), ("b", profile_for("iw_cxgb4", ep_timeout_secs=10))))
    both = mixed.link_pull_promise("carrier", traffic=False)
    assert both.bound_s is None and "siw sets no TCP keepalive" in both.basis
    assert "firmware's keepalive" in both.basis


def test_a_flap_ends_a_connection_at_its_first_admin_down_or_not_before_tcp_gives_up() -> None:
    siw = profile_for("siw", tcp_retries2=5)
    # siw_netdev_down moves every QP to ERR at NETDEV_DOWN: the first admin down ends it.
    assert siw.flap_bound_s("admin", down_s=0.1) == siw.admin_down_bound_s
    # A carrier down shorter than TCP's give-up time is retransmitted through...
    assert siw.flap_bound_s("carrier", down_s=1.0) is None
    # ...one as long as the pull bound under traffic ends it within that bound.
    busy = siw.link_pull_bound_s("carrier", True)
    assert busy is not None
    assert siw.flap_bound_s("carrier", down_s=busy) == busy
