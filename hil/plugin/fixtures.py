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
- ``contract``: ``contract(timeline)`` judges a timeline by the profile and
  fails the test with the verdict and the timeline when a rule is broken; a
  timeline the test recorded itself (``with cm.recording(...)``) is told to
  the run's observers with its verdict, so the report attaches both as it
  does for ``cm.run``'s (which told them already);
- the after-test checks (evidence by :mod:`hil.host.evidence`, judged by
  :mod:`hil.judge.checks`), autouse for every test that sets the pair up:
  resources back to their baseline and a clean kernel log on both hosts; a
  failure is an error in the test's teardown.  A report that is a known kernel
  finding of the test is reported apart (:mod:`hil.plugin.known`).

Options: ``--hil-kmsg-allow REGEX`` (repeatable) and the ini list
``hil_kmsg_allow`` add known harmless kernel lines to the default allowlist;
``--hil-settle SECONDS`` bounds the wait for resources to come back.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from hil.cm.observer import Observer
from hil.errors import HilError
from hil.host import evidence
from hil.judge.checks import compile_allow
from hil.judge.contract import Verdict, check
from hil.judge.expectations import DEFAULT_KERNEL_ALLOW
from hil.judge.timeline import explain
from hil.plugin import known, option_group
from hil.plugin.api import Contract
from hil.report.crash import crashed

if TYPE_CHECKING:
    from hil.cm.session import CMSession
    from hil.host.pairsetup import PairState
    from hil.judge.profiles import Profiles
    from hil.judge.timeline import Timeline
    from hil.run import PairRun

DIRECTIONS = ("a-b", "b-a")  # which host connects: A (to B), or B (to A)
# The kernel-log allowlist of the run: the default plus ini and command line.
ALLOW_KEY = pytest.StashKey[tuple[str, ...]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = option_group(parser)
    group.addoption(
        "--hil-kmsg-allow",
        action="append",
        default=[],
        metavar="REGEX",
        help="A kernel log line matching REGEX does not fail the after-test check "
        "(repeatable; added to the default allowlist and the ini list hil_kmsg_allow).",
    )
    group.addoption(
        "--hil-settle",
        type=float,
        default=evidence.SETTLE_S,
        metavar="SECONDS",
        help="How long the after-test check waits for RDMA resources to return to their "
        f"baseline (default {evidence.SETTLE_S:g}).",
    )
    parser.addini(
        "hil_kmsg_allow",
        type="linelist",
        default=[],
        help="Known harmless kernel log lines (regular expressions, one a line).",
    )


def pytest_configure(config: pytest.Config) -> None:
    try:
        allow = compile_allow(
            [*config.getini("hil_kmsg_allow"), *config.getoption("hil_kmsg_allow")]
        )
    except HilError as e:
        raise pytest.UsageError(str(e)) from None
    config.stash[ALLOW_KEY] = (*DEFAULT_KERNEL_ALLOW, *allow)


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


class _Judged(Observer):
    """Remembers the timelines whose verdict the run's observers were told already."""

    def __init__(self) -> None:
        self.timelines: list[Timeline] = []

    def verdict(self, timeline: Timeline, verdict: Verdict) -> None:
        self.timelines.append(timeline)

    def told(self, timeline: Timeline) -> bool:
        """True when this very timeline's verdict was told (``cm.run`` tells its own)."""
        return any(t is timeline for t in self.timelines)


def _judged(run: PairRun) -> _Judged:
    """The run's :class:`_Judged`, registered on first use."""
    found = next((o for o in run.observers if isinstance(o, _Judged)), None)
    if found is None:
        found = _Judged()
        run.observers.add(found)
    return found


@pytest.fixture
def contract(hil_run: PairRun, profile: Profiles) -> Contract:
    """``contract(timeline)``: the verdict; fails the test with its text when not ok."""
    judged = _judged(hil_run)
    judged.timelines.clear()  # one test's timelines at a time

    def judge(timeline: Timeline) -> Verdict:
        verdict = check(timeline, profile)
        if not judged.told(timeline):  # recorded by the test itself: attach it too
            hil_run.observers.verdict(timeline, verdict)
        if not verdict.ok:
            pytest.fail(explain(timeline, verdict.to_text()), pytrace=False)
        return verdict

    return judge


@pytest.fixture(autouse=True)
def after_test_checks(request: pytest.FixtureRequest) -> Iterator[None]:
    """For tests that set the pair up: resources back to baseline and kernel log clean after."""
    if "hil_setup" not in request.fixturenames:
        yield
        return
    run: PairRun = request.getfixturevalue("hil_run")
    request.getfixturevalue("hil_setup")
    # The wire capture starts before the baseline and stops after the settle below, so the
    # last FIN or RST of the test is in it (hil.plugin.wire).
    request.getfixturevalue("hil_wire")
    # Each host's debugfs QP and endpoint counts, and its snapshots (hil.plugin.hwevidence).
    extra = request.getfixturevalue("hil_hw_evidence")
    prof: Profiles = request.getfixturevalue("profile")
    probes = {h.name: run.hosts.agent(h.name) for h in run.pair.hosts}
    allow: tuple[str, ...] = request.config.stash[ALLOW_KEY]
    baseline = evidence.begin(probes, extra)
    yield
    if crashed(request.node) is not None:
        return  # the host is gone: the test failed saying so (hil.plugin.crash)
    settle = request.config.getoption("hil_settle")
    result = evidence.finish(probes, baseline, prof, allow, settle, known.scope(request, run))
    known.report(request.node, result)
    if not result.ok:
        pytest.fail(result.to_text(), pytrace=False)
