"""Fixtures for CM tests on the pair, in any test directory run with ``-p hil``.

- ``profile``: the contract profile of the provider the pair really runs
  (:mod:`hil.run.provider`: read on both hosts, a siw fallback noticed), or
  each host's own when they differ (a mixed pair: ``siw+iw_cxgb4``);
  ``profile.of(host)`` is one host's, for a suite that needs one side's value;
- ``direction``: ``"a-b"`` (host A connects to B) or ``"b-a"``, a parameter
  of every test that uses ``cm`` (pin it with
  ``@pytest.mark.parametrize("direction", ["a-b"])``);
- ``family``: ``"ipv4"`` or ``"ipv6"``, the data addresses the test's CM
  session uses: a parameter of every test that uses ``cm`` (or ``family``),
  one variant per family the reserved pair's link offers (both ports have an
  address of it: ``Pair.families``), its id last (``[a-b-ipv6]``);
  ``--hil-family`` runs only the families it names, and a test pins one with
  ``@pytest.mark.parametrize("family", ["ipv4"])``;
- ``cm``: a CM session on the set-up pair in that direction and family
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
from hil.inventory.hostmodel import FAMILIES, Family
from hil.judge.contract import Verdict
from hil.judge.timeline import explain
from hil.plugin import option_group, session_of
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


def pytest_addoption(parser: pytest.Parser) -> None:
    option_group(parser).addoption(
        "--hil-family",
        action="append",
        choices=FAMILIES,
        default=[],
        dest="hil_family",
        help="run the CM tests on these address families only (repeatable; default: every "
        "family the reserved pair offers)",
    )


@pytest.hookimpl(trylast=True)  # after the fixtures' own params: the family's id comes last
def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """One variant of every test that uses ``family`` (``cm`` does) per family offered."""
    if "family" not in metafunc.fixturenames or _pinned(metafunc, "family"):
        return
    families = offered_families(metafunc.config)
    metafunc.parametrize("family", families, ids=list(families))


def offered_families(config: pytest.Config) -> tuple[Family, ...]:
    """The families the session's CM tests run on: those the reserved pair offers (both
    ports have an address of it), as many as ``--hil-family`` keeps.

    Without a reserved pair (the plugin inactive, a collect-only run, a reservation
    that failed: the tests skip or fail on it) IPv4 alone, as before families.
    """
    hs = session_of(config)
    pair = hs.reserved.pair if hs is not None and hs.reserved is not None else None
    offered: tuple[Family, ...] = pair.families if pair is not None else ()
    wanted = config.getoption("hil_family") or FAMILIES
    # A pair with no family at all still gets its one variant: ``cm`` says what is missing.
    return tuple(f for f in offered if f in wanted) or (FAMILIES[0],)


def _pinned(metafunc: pytest.Metafunc, name: str) -> bool:
    """Whether the test parametrizes ``name`` itself."""
    for mark in metafunc.definition.iter_markers("parametrize"):
        names = mark.args[0]
        split = names.split(",") if isinstance(names, str) else list(names)
        if name in (n.strip() for n in split):
            return True
    return False


@pytest.fixture
def family() -> Family:
    """The test's address family (a parameter: ``pytest_generate_tests`` above)."""
    return FAMILIES[0]


@pytest.fixture
def cm(hil_run: PairRun, profile: Profiles, direction: str, family: Family) -> CMSession:
    """A CM session on the set-up pair in the test's direction and address family.

    Its own per-run evidence is off: the after-test checks take it per test,
    with the configured kernel-log allowlist.
    """
    return hil_run.session(direction, evidence=False, family=family)


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
