"""The pytest plugin (registered as ``hil`` through the ``pytest11`` entry point).

It is inactive unless an inventory is given (``--hil-inventory`` or
``HIL_INVENTORY``) or a lease is adopted (``--hil-lease``).  Then, at session
start, it reserves a pair (each xdist worker its own), so that the session
header names the pair and the holder; it renews the lease while the session
lives and releases it at the end.  Tests get the pair from the ``hil_pair``
session fixture; ``@pytest.mark.hil_requires("driver=iw_cxgb4", ...)`` skips
a test whose requirements the reserved pair does not meet.

The Allure report and the ``hil_metrics`` fixture are a plugin of their own
(``hil-report``: :mod:`hil.report.plugin`), an observer of the runs and tests
this one makes.

Session fixtures (one :class:`hil.run.PairRun` behind them all): ``hil_run``,
``hil_pair``, ``hil_hosts``, ``hil_journal``, ``hil_setup``.  Per-test
fixtures for CM tests (:mod:`hil.plugin.fixtures`): ``profile``, ``cm``,
``contract``, ``direction`` and the autouse after-test checks.  Observers of
every run come from the ``pytest_hil_observers`` hook (:mod:`hil.plugin.hookspec`).
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import pytest

from hil.errors import HilError

if TYPE_CHECKING:
    # These pull in the store drivers, paramiko and pyroute2: import them only
    # when the plugin is active, so that every other pytest run stays light.
    from hil.host.hosts import Hosts
    from hil.host.journal import Journal
    from hil.host.pairsetup import PairState
    from hil.plugin.session import HilSession, Reserved
    from hil.run import PairRun

SESSION_KEY = pytest.StashKey["HilSession"]()

pytest_plugins = [
    "hil.plugin.testrun",  # every test on the pair inside a TestRun: capture, evidence, verdicts
    "hil.plugin.fixtures",  # cm, profile, contract, direction
    "hil.plugin.timeouts",  # the agent call, step, test and session timeout layers
    "hil.plugin.attempts",  # each test's attempt marker: what ran when a run or host died
    "hil.plugin.crash",  # a host that crashes under a test: noticed, recovered or quarantined
]
# pytest marks a pytest_plugins module for assertion rewriting only just before
# it imports it, and refuses (PytestAssertRewriteWarning, an error under our
# filterwarnings) one that an earlier module already imported: fixtures imports
# known, known imports kernel.  A regular install escapes this because pytest
# marks the whole `hil` package up front; an editable one (ci/install's), run
# from outside the checkout, does not.  So mark them all here, before any is
# imported, as pytest asks of a plugin package ("call this before the module is
# actually imported, usually in your __init__.py": pytest.register_assert_rewrite).
pytest.register_assert_rewrite(*pytest_plugins)


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    from hil.plugin import hookspec

    pluginmanager.add_hookspecs(hookspec)


# The markers the plugin and its fixtures (:mod:`hil.plugin.fixtures`) give tests.
MARKERS = (
    "disruptive: takes a link of the reserved pair down (restored after); "
    "deselect with -m 'not disruptive'",
    "hil_requires(*requirements): skip unless the reserved pair meets every requirement "
    "(K=V, K>=V, ... as for --hil-require).",
)


def option_group(parser: pytest.Parser) -> pytest.OptionGroup:
    """The ``hil`` group of pytest's options, for the plugin and its fixtures."""
    return parser.getgroup("hil", "hil: iWARP lab pairs")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = option_group(parser)
    group.addoption(
        "--hil-inventory",
        default=os.environ.get("HIL_INVENTORY"),
        help="Inventory YAML file of the lab to take a pair from (env HIL_INVENTORY). "
        "Without it (or --hil-lease) the plugin does nothing.",
    )
    group.addoption(
        "--hil-store",
        default=os.environ.get("HIL_STORE"),
        help="Reservation store: a SQLite path or a postgresql:// URL (env HIL_STORE; "
        "default ~/.local/state/hil/reservations.db).",
    )
    group.addoption("--hil-pair", help="Reserve this pair (a link name of the inventory).")
    group.addoption(
        "--hil-require",
        action="append",
        default=[],
        metavar="K=V",
        help="Reserve any pair meeting this requirement, e.g. driver=iw_cxgb4, speed>=25000, "
        "tag=t6. Repeatable; all must hold.",
    )
    group.addoption(
        "--hil-lease",
        help="Adopt a lease already taken with 'hil reserve': renew it while the session "
        "lives, and leave its release to whoever took it.",
    )
    group.addoption(
        "--hil-wait",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="Queue for a busy pair for up to this long instead of failing at once.",
    )
    group.addoption(
        "--hil-module-param",
        action="append",
        default=[],
        metavar="DRIVER.NAME=VALUE",
        help="Pin this kernel module parameter on the pair for the session, over the "
        "link's module_params (e.g. iw_cxgb4.ep_timeout_secs=10; repeatable, for a matrix "
        "run); restored at the end.",
    )
    group.addoption(
        "--hil-race-sweeps",
        choices=("bounded", "full"),
        default="bounded",
        help="suites/test_races.py's race sweeps: bounded (stop once every order was "
        "reached, capped; ci/suites) or full (each race's whole window; the nightly).",
    )
    group.addoption(
        "--hil-race-scale",
        type=_race_scale,
        default=1.0,
        metavar="FACTOR",
        help="Widen the windows (and steps) of suites/test_races.py's sweeps of CM "
        "latencies (destroy_listen, disconnects) by this factor, for a kernel whose CM is "
        "that much slower (ci/nightly --debug-lab: 8); default 1.",
    )
    group.addoption(
        "--hil-ttl",
        type=float,
        default=300.0,
        metavar="SECONDS",
        help="Lease time to live; the session renews it every third of that.",
    )


def _race_scale(text: str) -> float:
    try:
        factor = float(text)
    except ValueError:
        factor = 0.0
    if not 1 <= factor <= 100:
        raise argparse.ArgumentTypeError(f"{text!r} is not a factor from 1 to 100")
    return factor


def pytest_configure(config: pytest.Config) -> None:
    for marker in MARKERS:
        config.addinivalue_line("markers", marker)
    if config.getoption("hil_inventory") or config.getoption("hil_lease"):
        from hil.plugin.session import HilSession

        config.stash[SESSION_KEY] = HilSession(config, config.getoption("hil_inventory"))


def session_of(config: pytest.Config) -> HilSession | None:
    """The session's hil state, when the plugin is active."""
    return config.stash.get(SESSION_KEY, None)


def _is_xdist_controller(config: pytest.Config) -> bool:
    # The controller runs no tests: its workers each reserve their own pair.
    return not hasattr(config, "workerinput") and config.getoption("dist", "no") != "no"


def pytest_sessionstart(session: pytest.Session) -> None:
    hs = session_of(session.config)
    if hs is None or _is_xdist_controller(session.config):
        return
    if session.config.option.collectonly:
        return
    hs.start()
    if hs.reserved is not None:
        session.config.hook.pytest_hil_reserved(config=session.config, pair=hs.reserved.pair.name)


def pytest_report_header(config: pytest.Config) -> list[str]:
    hs = session_of(config)
    if hs is None:
        return []
    if _is_xdist_controller(config):
        return [f"hil: each xdist worker reserves its own pair from {hs.describe_request()}"]
    return hs.header_lines()


def pytest_runtest_setup(item: pytest.Item) -> None:
    hs = session_of(item.config)
    if hs is None:
        return
    hs.stop_if_lease_lost()
    marker_reqs = [r for m in item.iter_markers("hil_requires") for r in m.args]
    if marker_reqs and hs.reserved is not None:
        reason = hs.unmet(marker_reqs)
        if reason:
            if hs.run is not None:
                hs.run.skipped(item.nodeid, reason)
            pytest.skip(reason)


@pytest.hookimpl(trylast=True)  # after the session fixtures' teardown undid our changes
def pytest_sessionfinish(session: pytest.Session) -> None:
    hs = session_of(session.config)
    if hs is not None:
        hs.finish()


@pytest.fixture(scope="session")
def hil_run(request: pytest.FixtureRequest) -> PairRun:
    """The session's pair run (:class:`hil.run.PairRun`): lease, hosts, journal, setup."""
    hs = session_of(request.config)
    if hs is None:
        pytest.skip("no lab inventory: pass --hil-inventory FILE (or set HIL_INVENTORY)")
    return hs.require_run()


@pytest.fixture(scope="session")
def hil_pair(hil_run: PairRun, request: pytest.FixtureRequest) -> Reserved:
    """The pair this session (or xdist worker) holds, with its lease and inventory."""
    hs = session_of(request.config)
    assert hs is not None and hs.reserved is not None  # hil_run failed otherwise
    return hs.reserved


@pytest.fixture(scope="session")
def hil_hosts(hil_run: PairRun) -> Iterator[Hosts]:
    """SSH sessions and agents for the pair's hosts, after undoing what dead runs left.

    Whatever an earlier run that was killed changed on the pair's hosts is in
    its restore journal; it is replayed first (unless the lease was adopted),
    so this session starts from the inventory's state.  At the end, every
    change this session journaled is undone.
    """
    name = hil_run.pair.name
    with _as_failure():
        hosts = hil_run.open_hosts()
    yield hosts
    with _as_failure():
        report = hil_run.restore()
        if report is not None:
            report.check(f"restoring pair {name}")


@pytest.fixture(scope="session")
def hil_journal(hil_run: PairRun, hil_hosts: Hosts) -> Journal:
    """The session's restore journal: every change it records is undone at the end."""
    return hil_run.journal


@pytest.fixture(scope="session")
def hil_setup(hil_run: PairRun, hil_hosts: Hosts) -> PairState:
    """The pair brought to the inventory's state (links, addresses, RDMA devices)."""
    with _as_failure():
        return hil_run.set_up()


@contextmanager
def _as_failure() -> Iterator[None]:
    # A lab problem in a fixture is a sentence for the engineer (it names the
    # host and what to do), not a traceback through hil's internals.
    # Failed outside the except block, so pytest does not print the HilError
    # again as the context of the failure.
    failure = None
    try:
        yield
    except HilError as e:
        failure = f"hil: {type(e).__name__}: {e}"
    if failure is not None:
        pytest.fail(failure, pytrace=False)
