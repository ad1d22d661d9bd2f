"""Attempt markers: the store knows which test was running when a run or a host died.

For every test on the pair (it uses ``hil_setup`` or ``hil_hosts``):

- before the test, the store records that it is being tried on the pair
  (:meth:`Store.begin_attempt`); after, how it ended (``passed``, ``failed``,
  ``skipped``, ``host crashed``);
- a marker a dead run left open on the pair's hosts is reported at the next
  session's start (it names the test the run died in) and closed as ``run died``;
- a test that crashed a host before is skipped, saying so, until a later run of it
  passes (:func:`hil.reservation.attempt.crashers`), unless ``--hil-rerun-crashers``.

Registered before :mod:`hil.plugin.crash`, so a crashed test's marker is closed
before its host is recovered.
"""

from __future__ import annotations

import logging
from collections.abc import Generator
from typing import TYPE_CHECKING

import pytest

from hil.errors import HilError
from hil.plugin import SESSION_KEY, option_group
from hil.report.crash import crashed
from hil.reservation.attempt import HOST_CRASHED, crashers

if TYPE_CHECKING:
    from hil.plugin.session import HilSession
    from hil.reservation.attempt import Attempt
    from hil.run import PairRun

log = logging.getLogger(__name__)

RUN_DIED = "run died"
_CRASHERS = pytest.StashKey[dict[str, "Attempt"]]()  # nodeid -> its newest crash marker
_OUTCOMES = pytest.StashKey[dict[str, str]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    option_group(parser).addoption(
        "--hil-rerun-crashers",
        action="store_true",
        help="Run tests that crashed a host of the pair before (skipped otherwise).",
    )


def hil_session(config: pytest.Config) -> HilSession | None:
    """The session's hil state, when the plugin made one."""
    return config.stash.get(SESSION_KEY, None)


def on_pair(item: pytest.Item) -> bool:
    """True when the test runs on the reserved pair (it uses its setup or hosts)."""
    names = set(getattr(item, "fixturenames", ()))
    return bool({"hil_setup", "hil_hosts"} & names)


def pair_run(item: pytest.Item) -> PairRun | None:
    """The session's pair run once a pair is reserved, else None."""
    hs = hil_session(item.config)
    return None if hs is None or hs.reserved is None else hs.run


def pytest_hil_reserved(config: pytest.Config, pair: str) -> None:
    hs = hil_session(config)
    if hs is None or hs.store is None or hs.run is None:
        return
    hosts = [h.name for h in hs.run.pair.hosts]
    try:
        live = {le.id for le in hs.store.leases()}
        for attempt in hs.store.attempts(hosts=hosts, unfinished=True):
            if attempt.lease_id in live:
                continue  # a live run's, not a dead one's
            hs.progress(
                f"{attempt}: its run died during it; if a host went down then, this test is "
                "the likely cause"
            )
            hs.store.end_attempt(attempt.id, RUN_DIED)
        config.stash[_CRASHERS] = crashers(hs.store.attempts(hosts=hosts, limit=1000))
    except HilError as e:
        hs.progress(f"could not read the attempt markers: {e}")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(
    item: pytest.Item, nextitem: pytest.Item | None
) -> Generator[None, object, object]:
    """The attempt marker around the test."""
    run, hs = pair_run(item), hil_session(item.config)
    attempt = None
    if run is not None and hs is not None and hs.store is not None and on_pair(item):
        attempt = _begin(hs, run, item)
    try:
        return (yield)
    finally:
        if attempt is not None and hs is not None:
            _end(hs, attempt, HOST_CRASHED if crashed(item) else _outcome(item))


def _begin(hs: HilSession, run: PairRun, item: pytest.Item) -> int | None:
    assert hs.store is not None and hs.reserved is not None
    a, b = (h.name for h in run.pair.hosts)
    try:
        return hs.store.begin_attempt(item.nodeid, run.pair.name, (a, b), hs.reserved.lease.id)
    except HilError as e:
        log.warning("could not record the attempt of %s: %s", item.nodeid, e)
        return None


def _end(hs: HilSession, attempt: int, outcome: str) -> None:
    assert hs.store is not None
    try:
        hs.store.end_attempt(attempt, outcome)
    except HilError as e:
        log.warning("could not end attempt %d: %s", attempt, e)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    item.stash.setdefault(_OUTCOMES, {})[report.when] = report.outcome
    return report


def _outcome(item: pytest.Item) -> str:
    """passed, failed or skipped, from the phases' reports (any failure wins)."""
    outcomes = item.stash.get(_OUTCOMES, {}).values()
    if "failed" in outcomes:
        return "failed"
    if "skipped" in outcomes:
        return "skipped"
    return "passed"


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    crashers = item.config.stash.get(_CRASHERS, None)
    if not crashers or item.config.getoption("hil_rerun_crashers"):
        return
    attempt = crashers.get(item.nodeid)
    if attempt is not None and on_pair(item):
        pytest.skip(
            f"hil: not run: it crashed a host before ({attempt}); "
            "--hil-rerun-crashers runs it again"
        )
