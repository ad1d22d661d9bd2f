"""The timeout layers (hil/timeouts.py): their defaults, how they are set, how an expiry reads."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from hil import timeouts
from hil.timeouts import DEFAULTS, Timeouts, active, configured, expired, session_bound


def test_every_layer_has_a_default_and_none_is_unbounded_by_accident() -> None:
    assert timeouts.LAYERS == ("agent call", "step", "test", "session", "nightly")
    assert (DEFAULTS.agent_call_s, DEFAULTS.step_slack_s, DEFAULTS.test_s) == (30, 10, 600)
    assert DEFAULTS.session_s is None  # the nightly around a session bounds it
    assert DEFAULTS.nightly_s == 8 * 3600


def test_configured_sets_the_given_bounds_for_the_block_only() -> None:
    with configured(agent_call_s=5, step_slack_s=None) as t:
        assert t is active()
        assert (active().agent_call_s, active().step_slack_s) == (5, DEFAULTS.step_slack_s)
        with configured(step_slack_s=1):
            assert (active().agent_call_s, active().step_slack_s) == (5, 1)
        assert active().step_slack_s == DEFAULTS.step_slack_s
    assert active() == DEFAULTS


def test_a_negative_bound_is_refused_naming_it() -> None:
    with pytest.raises(ValueError, match="timeout agent_call_s must be a number of seconds >= 0"):
        Timeouts(agent_call_s=-1)


def test_an_expiry_names_its_layer_its_bound_where_it_came_from_and_what_was_waited_for() -> None:
    assert (
        expired("step", 75, "DISCONNECTED on t6-a", "iw_cxgb4 close bound 65 s + slack 10 s")
        == "timeout (step layer, 75 s: iw_cxgb4 close bound 65 s + slack 10 s) waiting for "
        "DISCONNECTED on t6-a"
    )
    assert (
        expired("agent call", 30, "t6-a's agent to answer rdma_links")
        == "timeout (agent call layer, 30 s) waiting for t6-a's agent to answer rdma_links"
    )


@pytest.mark.parametrize("nightly, session", [(8 * 3600, 8 * 3600 - 600), (1200, 900), (40, 30)])
def test_the_session_inside_a_nightly_stops_first(nightly: float, session: float) -> None:
    assert session_bound(nightly) == session


def test_the_test_layers_default_is_the_projects_pytest_timeout() -> None:
    # The suites run under pyproject.toml's pytest config: one value in two files.
    config = tomllib.loads((Path(__file__).parent.parent / "pyproject.toml").read_text())
    assert config["tool"]["pytest"]["ini_options"]["timeout"] == DEFAULTS.test_s
