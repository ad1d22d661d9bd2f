"""Fixtures and options of the conformance suites (docs/suites.md).

On top of the hil plugin's session fixtures (``hil_pair``, ``hil_hosts``,
``hil_journal``, ``hil_setup``) this gives:

- ``profile``: the contract profile of the pair's provider
  (:func:`hil.cm.profiles.profile_for`), built with the hosts' own
  ``tcp_retries2`` / ``ep_timeout_secs``;
- ``cm``: a CM session on the set-up pair (:class:`hil.cm.session.CMSession`),
  closed after each test;
- ``contract``: ``contract(timeline)`` checks a timeline against the profile
  and fails the test with the verdict text when a rule is broken;
- ``direction``: ``"a-b"`` (host A connects to B) or ``"b-a"``, a parameter
  of every test that uses ``cm`` (a test may pin it with
  ``@pytest.mark.parametrize("direction", ["a-b"])``);
- the after-test checks (:mod:`hil.checks`), autouse for every test that
  uses the pair: resources back to baseline and a clean kernel log, on both
  hosts.  A failure shows as an error in the test's teardown, with the
  evidence.

Options: ``--hil-kmsg-allow REGEX`` (repeatable) and the ini list
``hil_kmsg_allow`` add known harmless kernel lines to the default allowlist;
``--hil-settle SECONDS`` bounds the wait for resources to come back.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import pytest
from cmsuite import explain

from hil import checks
from hil.cm.contract import Verdict, check
from hil.cm.expectations import DEFAULT_KERNEL_ALLOW
from hil.cm.profiles import Profile, profile_for
from hil.errors import HilError

if TYPE_CHECKING:
    from hil.cm.session import CMSession
    from hil.cm.timeline import Timeline
    from hil.hosts import Hosts
    from hil.journal import Journal
    from hil.pairsetup import PairState
    from hil.plugin.session import Reserved

DIRECTIONS = ("a-b", "b-a")  # which host connects: A (to B), or B (to A)
CXGB4_EP_TIMEOUT = "/sys/module/iw_cxgb4/parameters/ep_timeout_secs"
# A freshly booted TCG guest under load took over 30 s (the agent's call
# bound) for the agent's first netlink call, which waits for pyroute2's import.
WARMUP_TIMEOUT = 180.0
# The kernel-log allowlist of the run: the default plus ini and command line.
ALLOW_KEY = pytest.StashKey[tuple[str, ...]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("hil", "hil: iWARP lab pairs")
    group.addoption(
        "--hil-kmsg-allow", action="append", default=[], metavar="REGEX",
        help="A kernel log line matching REGEX does not fail the after-test check "
        "(repeatable; added to the default allowlist and the ini list hil_kmsg_allow).",
    )
    group.addoption(
        "--hil-settle", type=float, default=checks.SETTLE_S, metavar="SECONDS",
        help="How long the after-test check waits for RDMA resources to return to their "
        f"baseline (default {checks.SETTLE_S:g}).",
    )
    parser.addini("hil_kmsg_allow", type="linelist", default=[],
                  help="Known harmless kernel log lines (regular expressions, one a line).")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "disruptive: takes a link of the reserved pair down (restored after); "
        "deselect with -m 'not disruptive'",
    )
    try:
        allow = checks.compile_allow([*config.getini("hil_kmsg_allow"),
                                      *config.getoption("hil_kmsg_allow")])
    except HilError as e:
        raise pytest.UsageError(str(e)) from None
    config.stash[ALLOW_KEY] = (*DEFAULT_KERNEL_ALLOW, *allow)


@pytest.fixture(scope="session")
def warm_agents(hil_pair: Reserved, hil_hosts: Hosts) -> None:
    """Both hosts' agents started and past their first netlink call (generous bound)."""
    from concurrent.futures import ThreadPoolExecutor

    names = [h.name for h in hil_pair.pair.hosts]
    with ThreadPoolExecutor(max_workers=len(names)) as pool:
        list(pool.map(lambda n: hil_hosts.call(n, "links", timeout=WARMUP_TIMEOUT), names))


@pytest.fixture(scope="session")
def hil_setup(warm_agents: None, hil_setup: PairState) -> PairState:
    """The plugin's pair setup, after the agents are warm (cold TCG guests are slow)."""
    return hil_setup


@pytest.fixture(scope="session")
def profile(hil_pair: Reserved, hil_hosts: Hosts, hil_setup: PairState) -> Profile:
    """The contract profile of the pair's provider, with the hosts' own timeouts."""
    provider = provider_of(hil_pair, hil_setup)
    agent = hil_hosts.agent(hil_setup.a.host)
    if provider == "siw":
        return profile_for("siw", tcp_retries2=int(agent.sysctl("net.ipv4.tcp_retries2")))
    result = agent.run(["cat", CXGB4_EP_TIMEOUT], timeout=10)
    ep_timeout = int(result.stdout) if result.status == 0 and result.stdout.strip() else None
    return profile_for(provider, ep_timeout_secs=ep_timeout)


def provider_of(reserved: Reserved, state: PairState) -> str:
    """The RDMA driver the pair really runs: siw when setup fell back to it."""
    rnic = reserved.pair.rnic_a
    if state.a.rdma_device is not None and state.a.rdma_device != rnic.rdma_device:
        return "siw"  # the inventory's device is absent: setup picked its siw fallback
    return rnic.driver


@pytest.fixture(params=DIRECTIONS)
def direction(request: pytest.FixtureRequest) -> str:
    """Which host is active: ``a-b`` (A connects to B) or ``b-a``."""
    return str(request.param)


@pytest.fixture
def cm(hil_pair: Reserved, hil_hosts: Hosts, hil_journal: Journal, hil_setup: PairState,
       profile: Profile, direction: str) -> CMSession:
    """A CM session on the set-up pair in the test's direction.

    Its own per-run evidence is off: the after-test checks take it per test,
    with the configured kernel-log allowlist.
    """
    from hil.cm.session import CMSession

    return CMSession(hil_hosts, hil_pair.pair, direction=direction, profile=profile,
                     journal=hil_journal, evidence=False)


@pytest.fixture
def contract(profile: Profile) -> Callable[[Timeline], Verdict]:
    """``contract(timeline)``: the verdict; fails the test with its text when not ok."""
    def judge(timeline: Timeline) -> Verdict:
        verdict = check(timeline, profile)
        if not verdict.ok:
            pytest.fail(explain(timeline, verdict.to_text()), pytrace=False)
        return verdict
    return judge


@pytest.fixture(autouse=True)
def after_test_checks(request: pytest.FixtureRequest) -> Iterator[None]:
    """For tests on the pair: resources back to baseline and kernel log clean after."""
    if "hil_setup" not in request.fixturenames:
        yield
        return
    hosts: Hosts = request.getfixturevalue("hil_hosts")
    state: PairState = request.getfixturevalue("hil_setup")
    prof: Profile = request.getfixturevalue("profile")
    probes = {h: hosts.agent(h) for h in (state.a.host, state.b.host)}
    baseline = checks.begin(probes)
    yield
    result = checks.finish(probes, baseline, prof, request.config.stash[ALLOW_KEY],
                           request.config.getoption("hil_settle"))
    if not result.ok:
        pytest.fail(result.to_text(), pytrace=False)
