"""Hardware evidence in pytest: each host's NIC counters and driver debugfs around a test.

For every test that sets the pair up, the ``hil_hw_evidence`` fixture
(requested by the after-test checks, so it brackets their baseline and
settle wait):

1. once per session, finds on each host the port's netdev and the RDMA
   driver's debugfs directory (:func:`hil.host.hwevidence.locate`; a siw
   host has none, which is recorded as absent);
2. gives the after-test checks each host's debugfs QP and endpoint counts
   (:func:`hil.host.hwevidence.counter`), held to the same settle and leak
   rule as ``rdma resource``'s (:mod:`hil.host.evidence`), whatever the
   option below says;
3. when Allure results are written and ``--hil-hw-evidence`` is not ``off``,
   takes a snapshot of both hosts before and after the test (``ethtool -S``
   and one ``cat`` of the debugfs files per host, the hosts at once);
4. attaches the counters that changed and the debugfs files before/after
   (:func:`hil.report.attach.attach_hw_evidence`) to a test that failed
   (``failed``, the default: in setup, call or teardown, the after-test
   checks' and the wire judge's failures included) or to every test (``all``).

Taking the evidence never fails a test: a host that cannot give it is
noted in the report instead.
"""

from __future__ import annotations

import logging
from collections.abc import Generator, Iterator, Mapping
from typing import TYPE_CHECKING

import pytest

from hil.errors import HilError
from hil.host import hwevidence
from hil.host.evidence import Counter
from hil.plugin import option_group
from hil.report.crash import crashed

if TYPE_CHECKING:
    from hil.agent.agent import Runner
    from hil.run import PairRun

log = logging.getLogger(__name__)

HW_CHOICES = ("failed", "all", "off")
TARGETS_KEY = pytest.StashKey[dict[str, hwevidence.Target]]()
EVIDENCE_KEY = pytest.StashKey[hwevidence.HwEvidence]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = option_group(parser)
    group.addoption(
        "--hil-hw-evidence",
        choices=HW_CHOICES,
        default="failed",
        help="Attach each host's ethtool -S counters (those that changed) and the RDMA "
        "driver's debugfs files (iw_cxgb4: qps, eps, stags, stats) before and after a test "
        "on the pair: for failed tests (default), all tests, or none (off: no snapshots; "
        "the after-test checks still compare the debugfs QP and endpoint counts).",
    )


@pytest.fixture
def hil_hw_evidence(request: pytest.FixtureRequest) -> Iterator[Mapping[str, Counter]]:
    """Each host's debugfs counts for the after-test checks; snapshots for the report.

    Yields ``{host: counter}`` for :func:`hil.host.evidence.begin` (empty for
    a test that does not set the pair up).
    """
    if "hil_setup" not in request.fixturenames:
        yield {}
        return
    run: PairRun = request.getfixturevalue("hil_run")
    request.getfixturevalue("hil_setup")
    targets = session_targets(request.config, run)
    agents = {host: run.hosts.agent(host) for host in targets}
    counters = {host: hwevidence.counter(agents[host], t) for host, t in targets.items()}
    if not targets or not _snapshots_wanted(request.config):
        yield counters
        return
    before = _snapshots(agents, targets, "before")
    yield counters
    if crashed(request.node) is not None:
        return  # a host of the pair crashed: no "after" to take (hil.plugin.crash)
    after = _snapshots(agents, targets, "after")
    if before is not None and after is not None:
        request.node.stash[EVIDENCE_KEY] = hwevidence.HwEvidence(before, after)


def _snapshots_wanted(config: pytest.Config) -> bool:
    from hil.report.plugin import alluredir

    return config.getoption("hil_hw_evidence") != "off" and alluredir(config) is not None


def session_targets(config: pytest.Config, run: PairRun) -> dict[str, hwevidence.Target]:
    """Where each host's evidence is: found once per session (the devices do not change).

    None at all (noted in the report) when the run has no provider to read
    it from: the fixtures that judge the test say why.
    """
    if TARGETS_KEY not in config.stash:
        try:
            drivers = {h.host: h.driver for h in run.provider.hosts}
            found = {
                port.host: hwevidence.locate(
                    run.hosts.agent(port.host),
                    port.host,
                    port.netdev,
                    port.rdma_device,
                    drivers[port.host],
                )
                for port in (run.state.a, run.state.b)
            }
        except HilError as e:
            from hil.report import attach

            log.warning("no hardware evidence this session: %s", e)
            attach.note("hardware evidence not taken", str(e))
            found = {}
        config.stash[TARGETS_KEY] = found
    return config.stash[TARGETS_KEY]


def _snapshots(
    agents: Mapping[str, Runner], targets: Mapping[str, hwevidence.Target], when: str
) -> dict[str, hwevidence.HostSnapshot] | None:
    """Both hosts' snapshots (at once), or None (noted in the report) when a host failed."""
    from hil.host.evidence import each
    from hil.report import attach

    try:
        return each(targets, lambda t: hwevidence.snapshot(agents[t.host], t))
    except HilError as e:
        log.warning("no hardware evidence %s the test: %s", when, e)
        attach.note(f"hardware evidence not taken {when} the test", str(e))
        return None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if report.when == "teardown" and EVIDENCE_KEY in item.stash:
        # After the teardown: the after-test checks and the wire judge have spoken.
        # The report plugin keeps the test's earlier phases; this one may not be kept yet.
        from hil.report import attach
        from hil.report.plugin import failed

        mode = item.config.getoption("hil_hw_evidence")
        if mode == "all" or (mode == "failed" and (report.failed or failed(item))):
            attach.attach_hw_evidence(item.stash[EVIDENCE_KEY])
    return report
