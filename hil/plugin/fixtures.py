"""Fixtures for CM tests on the pair, in any test directory run with ``-p hil``.

- ``profile``: the contract profile of the provider the pair really runs
  (:mod:`hil.run.provider`: read on both hosts, a siw fallback noticed), or
  each host's own when they differ (a mixed pair: ``siw+iw_cxgb4``);
  ``profile.of(host)`` is one host's, for a suite that needs one side's value;
- ``direction``: ``"a-b"`` (host A connects to B) or ``"b-a"``, a parameter
  of every test that uses ``cm`` (pin it with
  ``@pytest.mark.parametrize("direction", ["a-b"])``);
- ``cm``: a CM session on the set-up pair in that direction
  (:class:`hil.cm.session.CMSession`), its runs told to the observers;
- ``contract``: ``contract(timeline)`` gives the contract's verdict on a
  timeline (the one its run was given, :class:`hil.run.testrun.TestRun`)
  and fails the test with the verdict and the timeline when a rule is
  broken.  Every timeline a test records is judged after it anyway; the
  call is where a test looks at a verdict or adds its own expectations.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from hil.errors import HilError
from hil.judge.contract import Verdict
from hil.judge.timeline import explain
from hil.plugin.api import Contract

if TYPE_CHECKING:
    from hil.cm.session import CMSession
    from hil.host.pairsetup import PairState
    from hil.judge.profiles import Profiles
    from hil.judge.timeline import Timeline
    from hil.run import PairRun
    from hil.run.testrun import TestRun

DIRECTIONS = ("a-b", "b-a")  # which host connects: A (to B), or B (to A)


@pytest.fixture(scope="session")
def profile(hil_run: PairRun, hil_setup: PairState) -> Profiles:
    """The contract profile(s) of the providers the hosts really run (``of(host)``: one's)."""
    try:
        return hil_run.profile
    except HilError as e:
        pytest.fail(f"hil: {type(e).__name__}: {e}", pytrace=False)


@pytest.fixture(params=DIRECTIONS)
def direction(request: pytest.FixtureRequest) -> str:
    """Which host is active: ``a-b`` (A connects to B) or ``b-a``."""
    return str(request.param)


@pytest.fixture
def cm(hil_run: PairRun, profile: Profiles, direction: str) -> CMSession:
    """A CM session on the set-up pair in the test's direction.

    Its own per-run evidence is off: the after-test checks take it per test,
    with the configured kernel-log allowlist.
    """
    return hil_run.session(direction, evidence=False)


@pytest.fixture
def contract(profile: Profiles, hil_test: TestRun | None) -> Contract:
    """``contract(timeline)``: the verdict; fails the test with its text when not ok."""

    def judge(timeline: Timeline) -> Verdict:
        if hil_test is None:
            pytest.fail("hil: the contract fixture needs a test on the set-up pair", pytrace=False)
        verdict = hil_test.contract(timeline)
        if not verdict.ok:
            pytest.fail(explain(timeline, verdict.to_text()), pytrace=False)
        return verdict

    return judge
