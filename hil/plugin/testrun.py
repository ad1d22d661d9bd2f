"""Every test on the pair runs inside a :class:`hil.run.testrun.TestRun` (the ``hil_test`` fixture).

The stages around a test (capture, baseline, settle, kmemleak, evidence,
wire judge, known kernel findings, the contract of every timeline) and their
order are the TestRun's; this module only turns the options into its
:class:`~hil.run.testrun.TestOptions`, tells it how the test's own phases
ended, and fails the test's teardown with every failed verdict at once.
Tests that do not set the pair up get nothing.

Options: ``--hil-wire judge|off`` and ``--hil-wire-packets N`` (the capture),
``--hil-settle SECONDS`` and ``--hil-kmsg-allow REGEX`` / the ini list
``hil_kmsg_allow`` (the after-test checks), ``--hil-hw-evidence`` (NIC and
debugfs snapshots for the report), ``--hil-known-kernel-findings FILE``
(default ``suites/known-kernel-findings.yaml`` under the rootdir; a test an
entry with ``crashes: true`` names is skipped on the kernels it names, unless
``--hil-rerun-crashers``).
"""

from __future__ import annotations

from collections.abc import Generator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from hil.errors import HilError, InputError
from hil.host.evidence import SETTLE_S
from hil.judge import known
from hil.judge.checks import compile_allow
from hil.judge.expectations import DEFAULT_KERNEL_ALLOW
from hil.plugin import crash, option_group, session_of
from hil.plugin.consoles import GuestConsoles
from hil.run.testparts import WIRE_PACKETS, TestOptions

if TYPE_CHECKING:
    from hil.run.testrun import TestRun

WIRE_CHOICES = ("judge", "off")
HW_CHOICES = ("failed", "all", "off")
DEFAULT_FINDINGS = Path("suites") / "known-kernel-findings.yaml"  # under pytest's rootdir


def pytest_addoption(parser: pytest.Parser) -> None:
    group = option_group(parser)
    group.addoption(
        "--hil-wire",
        choices=WIRE_CHOICES,
        default="judge",
        help="Capture both ends of the pair's link during each test on the pair and judge "
        "the packets by the wire rules (judge, the default), or capture nothing (off).",
    )
    group.addoption(
        "--hil-wire-packets",
        type=int,
        default=WIRE_PACKETS,
        metavar="N",
        help=f"Keep at most the first N packets per capture point and test "
        f"(default {WIRE_PACKETS}).",
    )
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
        default=SETTLE_S,
        metavar="SECONDS",
        help="How long the after-test check waits for RDMA resources to return to their "
        f"baseline (default {SETTLE_S:g}).",
    )
    group.addoption(
        "--hil-hw-evidence",
        choices=HW_CHOICES,
        default="failed",
        help="Attach each host's ethtool -S counters (those that changed) and the RDMA "
        "driver's debugfs files (iw_cxgb4: qps, eps, stags, stats) before and after a test "
        "on the pair: for failed tests (default), all tests, or none (off: no snapshots; "
        "the after-test checks still compare the debugfs QP and endpoint counts).",
    )
    group.addoption(
        "--hil-known-kernel-findings",
        metavar="FILE",
        help="The known kernel findings (reported apart, not failing the test that is "
        f"known to show them; default {DEFAULT_FINDINGS} under the rootdir, when it exists).",
    )
    parser.addini(
        "hil_kmsg_allow",
        type="linelist",
        default=[],
        help="Known harmless kernel log lines (regular expressions, one a line).",
    )


def test_options(config: pytest.Config) -> TestOptions:
    """The session's :class:`TestOptions`; UsageError for a bad pattern or findings list."""
    try:
        allow = compile_allow(
            [*config.getini("hil_kmsg_allow"), *config.getoption("hil_kmsg_allow")]
        )
        findings = _findings(config)
    except (HilError, InputError) as e:
        raise pytest.UsageError(str(e)) from None
    writing = bool(config.getoption("allure_report_dir", None))
    return TestOptions(
        wire=config.getoption("hil_wire") != "off",
        wire_packets=config.getoption("hil_wire_packets"),
        settle_s=config.getoption("hil_settle"),
        allow=(*DEFAULT_KERNEL_ALLOW, *allow),
        known=findings,
        hw_snapshots=writing and config.getoption("hil_hw_evidence") != "off",
        liveness_s=config.getoption("hil_liveness"),
    )


def _findings(config: pytest.Config) -> tuple[known.KnownFinding, ...]:
    given = config.getoption("hil_known_kernel_findings", None)
    path = Path(given) if given else config.rootpath / DEFAULT_FINDINGS
    if not given and not path.is_file():
        return ()
    return known.load(path, config.rootpath)


@pytest.hookimpl(trylast=True)  # after the plugin's own made the session (SESSION_KEY)
def pytest_configure(config: pytest.Config) -> None:
    # Read once, and now: a bad allow pattern or findings list stops the session at once.
    options = test_options(config)
    hs = session_of(config)
    if hs is not None:
        hs.test_options = options


@pytest.fixture(autouse=True)
def hil_test(request: pytest.FixtureRequest) -> Iterator[TestRun | None]:
    """The test's :class:`TestRun`: every stage for a test that sets the pair up, the
    attempt marker and the crash watch for one that only uses its hosts; None else."""
    hs = session_of(request.config)
    names = set(request.fixturenames)
    rdma = "hil_setup" in names
    if hs is None or not (rdma or "hil_hosts" in names):
        yield None
        return
    # The pair set up (or its hosts opened) before the test's first stage: a session
    # fixture, asked for by name because which one depends on what the test uses.
    request.getfixturevalue("hil_setup" if rdma else "hil_hosts")
    run, options = hs.require_run(), hs.test_options
    assert options is not None  # set at configure
    item, consoles = request.node, GuestConsoles(request.config)
    _skip_known_crash(item, options, run.facts.kernels())
    signal = crash.signaller(item)
    with run.test(
        item.nodeid, options, rdma=rdma, on_crash=signal, describe=consoles.describe
    ) as t:
        hs.current = t
        consoles.mark()  # what the guests' consoles take from here on is the test's
        crash.arm(item)
        try:
            yield t
        finally:
            # The after-test stages notice a crash themselves (no signal into them).
            crash.disarm(item)
            hs.current = None
    _conclude(item, t)


def _skip_known_crash(item: pytest.Item, options: TestOptions, kernels: tuple[str, ...]) -> None:
    """Skip a test that a known finding says stops these kernels (``crashes: true``),
    naming the entry, unless ``--hil-rerun-crashers``."""
    found = known.stopping(options.known, item.nodeid, kernels)
    if found is None or item.config.getoption("hil_rerun_crashers", False):
        return
    pytest.skip(
        f"hil: not run: known kernel finding {found.id} stops {', '.join(kernels)} in this "
        f"test ({found.upstream}); --hil-rerun-crashers runs it"
    )


def _conclude(item: pytest.Item, t: TestRun) -> None:
    """The test's teardown fails with every failed verdict, or with a crash noticed in
    the after-test stages; known kernel findings become report sections."""
    result = t.result
    assert result is not None
    check = None if result.evidence is None else result.evidence.check
    for match in () if check is None else check.known:
        name = f"known kernel finding {match.finding.id} on {match.report.host}"
        item.add_report_section("teardown", name, match.report.text())
    if result.crash is not None:
        why = crash.noticed(item, result.crash)
        if why is not None:  # noticed in the after-test stages: say it here
            pytest.fail(why, pytrace=False)
        return
    if result.failures:
        pytest.fail("\n\n".join(result.failures), pytrace=False)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Tell the running TestRun how the test's setup and call ended."""
    report = yield
    hs = session_of(item.config)
    t = None if hs is None else hs.current
    if t is not None and report.when in ("setup", "call") and not report.passed:
        lines = report.longreprtext.splitlines()
        t.fail(lines[-1] if lines else report.when, "skipped" if report.skipped else "failed")
    return report
