"""The reporting plugin (``hil-report`` in ``pytest11``): Allure labels, captures, run files.

An observer of the ``hil`` plugin's runs and tests; it works with any test
and does its Allure work only when allure-pytest writes results
(``--alluredir``).  It also gives tests ``hil_metrics``
(:mod:`hil.report.metricsfixture`):

- labels on every test (:mod:`hil.report.labels`): ``suite`` and
  ``parentSuite`` (the module without ``test_``; ``subSuite`` the test
  function of parametrized tests), ``pair`` (the reserved pair),
  ``provider`` (the driver pair setup found on both hosts, for tests on the
  set-up pair; never the inventory's claim), ``module_param`` (each kernel
  module parameter the run pinned, as read back), ``direction`` and
  ``pull_mode`` (from the test's parameters of those names; ``mode`` counts
  as the pull mode);
- an observer of the session's pair run and its tests
  (:mod:`hil.report.testobserver`, given to the plugin through
  ``pytest_hil_observers``): every sequence run becomes a step with its
  actions, the timeline and the verdict attached; each test on the pair gets
  its ``kernel`` label, ``rdma resource`` counts before/after and the kernel
  log of both hosts, its known kernel findings and kmemleak reports, the wire
  verdict, the decoded exchange and each timeline's picture with the wire
  lane, and the captures of both ends by ``--hil-pcap``: ``failed`` (default)
  keeps those of a test that failed or whose wire verdict failed, ``all`` of
  every test, ``none`` attaches none;
- each test's metrics (``hil.report.attach.metric``) as an attachment;
- the quarantine list (:mod:`hil.report.quarantine`): a listed test gets the
  tag ``known-flaky`` and its issue link, and its result is marked flaky at
  the end (a failure's message starts ``known flaky:``, its own category);
- at the end: ``categories.json``, ``executor.json`` (``HIL_BUILD_ORDER``
  numbers a run outside CI), ``environment.properties`` (read through the
  agents before the first test on the pair, while its hosts answer;
  with ``provider``, ``profile`` and each host's ``HOST.provider``: what pair
  setup found, e.g. ``siw on siw_eth1 (siw fallback on HOST: the inventory
  says iw_cxgb4)``, never the inventory's claim)
  and ``hil-metrics.json`` (every metric of the run, for the trends the
  pipelines keep).
"""

from __future__ import annotations

import json
import logging
import os
import platform
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from hil.report import attach, quarantine
from hil.report.categories import write_categories
from hil.report.environment import write_properties
from hil.report.executor import write_executor
from hil.report.labels import label_module_params, label_provider, labels_for
from hil.report.metrics import RECORDER
from hil.report.testobserver import AllureTestObserver

if TYPE_CHECKING:
    # Both pull in paramiko: imported when a test uses the pair, not by every pytest run.
    from hil.cm.observer import Observer
    from hil.run import PairRun

log = logging.getLogger(__name__)

PCAP_CHOICES = ("failed", "all", "none")
ENV_KEY = pytest.StashKey[dict[str, str]]()
REPORTS_KEY = pytest.StashKey[dict[str, pytest.TestReport]]()
OBSERVER_KEY = pytest.StashKey[AllureTestObserver]()
PAIR_KEY = pytest.StashKey[str]()
pytest_plugins = ["hil.report.metricsfixture"]
METRICS_GLOB = "hil-metrics*.json"  # one file per process: xdist workers write side by side


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("hil-report", "hil: Allure reports")
    group.addoption(
        "--hil-pcap",
        choices=PCAP_CHOICES,
        default="failed",
        help="Attach the wire judge's captures (both ends of the pair's link) of each test "
        "on the pair: for failed tests (default; a failed wire verdict counts), all tests, "
        "or none.",
    )
    group.addoption(
        "--hil-known-flaky",
        metavar="FILE",
        help="The quarantine list of known-flaky tests (default: suites/known-flaky.yaml "
        "under the rootdir, if present); they run and their failures are reported apart.",
    )


def pytest_configure(config: pytest.Config) -> None:
    quarantine.configure(config)  # a bad list stops the session before anything runs
    hw = config.getoption("hil_hw_evidence", "failed")
    config.stash[OBSERVER_KEY] = AllureTestObserver(pcap=config.getoption("hil_pcap"), hw=hw)


def alluredir(config: pytest.Config) -> Path | None:
    """Where allure-pytest writes results, or None when it is not writing any."""
    value = config.getoption("allure_report_dir", None)
    return Path(value) if value else None


def pytest_hil_observers(config: pytest.Config) -> list[Observer]:
    """The report's observer of the session's pair run and its tests."""
    return [config.stash[OBSERVER_KEY]]


def pytest_hil_reserved(config: pytest.Config, pair: str) -> None:
    """Remember the session's pair, for the labels."""
    config.stash[PAIR_KEY] = pair


@pytest.hookimpl(tryfirst=True)  # before -k/-m deselect: the list is checked against all
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    quarantine.mark_items(config, items)
    pair = config.stash.get(PAIR_KEY, None)
    for item in items:
        for name, value in labels_for(item, pair):
            item.add_marker(pytest.mark.allure_label(value, label_type=name))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    item.stash.setdefault(REPORTS_KEY, {})[report.when] = report
    return report


def failed(item: pytest.Item) -> bool:
    """True when a phase of the test (setup, call, teardown) reported so far failed."""
    return any(r.failed for r in item.stash.get(REPORTS_KEY, {}).values())


def _uses_pair(request: pytest.FixtureRequest) -> bool:
    return bool({"hil_pair", "hil_hosts", "hil_setup"} & set(request.fixturenames))


def _gather_environment(request: pytest.FixtureRequest) -> None:
    config = request.config
    if ENV_KEY in config.stash:
        return
    from hil.report.environment import gather

    request.getfixturevalue("hil_hosts")
    run = request.getfixturevalue("hil_run")
    props = gather(run.hosts, run.pair)
    observer = config.stash.get(OBSERVER_KEY, None)
    if observer is not None and observer.run is not None:  # set up: its provider is known
        props.update(provider_properties(request.getfixturevalue("hil_run"), observer.run.profile))
    config.stash[ENV_KEY] = props


def provider_properties(run: PairRun, profile: str) -> dict[str, str]:
    """What the set-up pair really runs (pair setup read it on both hosts): the pair's
    ``provider`` and ``profile``, and each host's driver, device, settings and how it
    differs from the inventory."""
    p = run.provider
    props = {"provider": p.driver, "profile": profile}
    for h in p.hosts:
        settings = "".join(f", {k}={v}" for k, v in sorted(h.settings.items()))
        note = f" ({h.note()})" if h.note() else ""
        props[f"{h.host}.provider"] = f"{h.driver} on {h.rdma_device}{settings}{note}"
    return props


@pytest.fixture(autouse=True)
def _hil_report(request: pytest.FixtureRequest) -> Iterator[None]:
    """Per test: name the test for its metrics, label it, attach its metrics."""
    item = request.node
    RECORDER.current_test = item.nodeid
    observer = request.config.stash.get(OBSERVER_KEY, None)
    writing = alluredir(request.config) is not None
    on_pair = writing and _uses_pair(request) and PAIR_KEY in request.config.stash
    if on_pair:
        if "hil_setup" in request.fixturenames:
            request.getfixturevalue("hil_setup")  # the provider label is what setup found
        label_provider(item, observer)
        label_module_params(request)
        # Once, before the first test on the pair: its hosts answer then (after a test,
        # one that crashed would only make us wait).
        _gather_environment(request)
    yield
    attach.attach_metrics(item.nodeid)


def base_properties() -> dict[str, str]:
    """What is known without a pair: the controller and its Python."""
    return {
        "controller": platform.node(),
        "controller.python": platform.python_version(),
        "pytest": pytest.__version__,
    }


def write_metrics(directory: Path) -> Path:
    """Every metric of this process as JSON (``[{test, name, value, unit, labels}, ...]``)."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    path = directory / (f"hil-metrics-{worker}.json" if worker else "hil-metrics.json")
    path.write_text(json.dumps([m.to_json() for m in RECORDER.all()], indent=1))
    return path


def pytest_sessionfinish(session: pytest.Session) -> None:
    directory = alluredir(session.config)
    if directory is None or not directory.is_dir():
        return
    write_categories(directory)
    quarantine.flag_results(directory)
    write_executor(directory)
    gathered = session.config.stash.get(ENV_KEY, None) or {"pair": "none"}
    props = {**base_properties(), **gathered}
    write_properties(directory, props)
    write_metrics(directory)
