"""Attempt markers: the store knows which test was running when a run or a host died.

For every test on the pair (it uses ``hil_setup`` or ``hil_hosts``):

- before the test, the store records that it is being tried on the pair
  (:meth:`Store.begin_attempt`); after, how it ended (``passed``, ``failed``,
  ``skipped``, ``host crashed``, ...): the test's :class:`hil.run.testrun.TestRun`
  writes both;
- a marker a dead run left open on the pair's hosts is reported at the next
  session's start (it names the test the run died in) and closed as ``run died``;
- a test that crashed a host before is skipped, saying so, until a later run of it
  passes (:func:`hil.reservation.attempt.crashers`), unless ``--hil-rerun-crashers``.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import pytest

from hil.errors import HilError
from hil.plugin import option_group, session_of
from hil.reservation.attempt import crashers

if TYPE_CHECKING:
    from hil.run import PairRun

log = logging.getLogger(__name__)

RUN_DIED = "run died"


def pytest_addoption(parser: pytest.Parser) -> None:
    option_group(parser).addoption(
        "--hil-rerun-crashers",
        action="store_true",
        help="Run tests that crashed a host of the pair before (skipped otherwise).",
    )


def on_pair(item: pytest.Item) -> bool:
    """True when the test runs on the reserved pair (it uses its setup or hosts)."""
    names = set(getattr(item, "fixturenames", ()))
    return bool({"hil_setup", "hil_hosts"} & names)


def pair_run(item: pytest.Item) -> PairRun | None:
    """The session's pair run once a pair is reserved, else None."""
    hs = session_of(item.config)
    return None if hs is None or hs.reserved is None else hs.run


def pytest_hil_reserved(config: pytest.Config, pair: str) -> None:
    hs = session_of(config)
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
        hs.crashers = crashers(hs.store.attempts(hosts=hosts, limit=1000))
    except HilError as e:
        hs.progress(f"could not read the attempt markers: {e}")


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    hs = session_of(item.config)
    if hs is None or not hs.crashers or item.config.getoption("hil_rerun_crashers"):
        return
    attempt = hs.crashers.get(item.nodeid)
    if attempt is not None and on_pair(item):
        pytest.skip(
            f"hil: not run: it crashed a host before ({attempt}); "
            "--hil-rerun-crashers runs it again"
        )
