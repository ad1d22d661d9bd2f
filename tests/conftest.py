"""Fixtures shared by hil's own tests.

- ``netns_lab``: the session's NetnsLab (netnslab): two network-namespace
  hosts with real sshd, a data cable between them, keys, known_hosts and an
  inventory.  Tests that use it are marked ``netns`` automatically.
- ``virtual_lab``: the session's virtual lab of two QEMU siw guests (hil.lab),
  booted once for every test that needs real iWARP (tests/lab, tests/cm).
  Tests marked ``restarts_guests`` (they crash and recover guests) run after
  the others, and those marked ``takes_lab_down`` after every other test.
  Under xdist (``LAB_WORKERS=2 ci/tests``: ``-n 2 --dist loadfile``) each worker boots
  a lab of its own and takes whole files in that order, so such a test sits in
  a file of its own (tests/lab/test_lab_down.py).
- ``store``: a fresh SQLite reservation store (tests/reservation has its own,
  which also runs on PostgreSQL).

``--lab-tests only`` runs just the tests marked ``lab``, ``--lab-tests none``
all the others: ci/tests runs the two halves side by side, one lab for the first.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from netnslab import NetnsLab, cleanup_stale
from vlab import VirtualLab, booted_lab

from hil.plugin.interrupt import sigterm_as_interrupt
from hil.reservation import Store, open_store


def netns_unavailable() -> str | None:
    """Why the netns lab cannot be built here, or None when it can."""
    if os.geteuid() != 0:
        return "the netns lab needs root (network namespaces, sshd on port 22)"
    for tool in ("ip", "/usr/sbin/sshd", "ssh-keygen", "unshare"):
        if shutil.which(tool) is None:
            return f"the netns lab needs {tool} (ci/install installs it)"
    probe = subprocess.run(
        ["ip", "netns", "list"], capture_output=True, text=True, timeout=10, check=False
    )
    if probe.returncode != 0:
        return f"'ip netns' does not work here: {probe.stderr.strip()}"
    return None


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--lab-tests",
        choices=("all", "only", "none"),
        default="all",
        help="run every test (all), only those marked lab (only), or all others (none); "
        "ci/tests runs 'only' and 'none' side by side",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "takes_lab_down: stops the session's virtual lab; runs after every other test"
    )
    config.addinivalue_line(
        "markers",
        "restarts_guests: crashes and recovers the session lab's guests; runs after the "
        "other tests, before those that take the lab down",
    )
    if hasattr(config, "workerinput"):
        # An xdist worker (ci/tests runs the tests without a lab on several): the pytest
        # runs its tests start (pytester) are not workers, and hil's plugin in them must
        # not take them for one (it names its holder and metrics file after the worker).
        for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
            os.environ.pop(name, None)


# The order tests run in: those that need no virtual lab first (the lab kernel,
# on a fresh machine, is built meanwhile), then the lab tests (ci/tests runs the
# two parts side by side, see --lab-tests); the lab's guests are restarted only
# once every test that needs them as booted has run, and stopped last.
_LAST = ("lab", "restarts_guests", "takes_lab_down")


def _rank(item: pytest.Item) -> int:
    return max((i + 1 for i, m in enumerate(_LAST) if item.get_closest_marker(m)), default=0)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every test that uses the netns lab, so ``-m 'not netns'`` leaves it out;
    leave out what ``--lab-tests`` says; order the tests as ``_LAST`` says."""
    for item in items:
        if "netns_lab" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.netns)
    part = config.getoption("lab_tests")
    if part != "all":
        wanted = part == "only"
        keep = [i for i in items if bool(i.get_closest_marker("lab")) == wanted]
        config.hook.pytest_deselected(items=[i for i in items if i not in keep])
        items[:] = keep
    items.sort(key=_rank)


@pytest.fixture(scope="session")
def netns_lab() -> Iterator[NetnsLab]:
    """Two namespace hosts with real sshd for the whole session; torn down at its end."""
    reason = netns_unavailable()
    if reason:
        pytest.skip(reason)
    cleanup_stale()
    # A CI runner stops a job with SIGTERM: as an interrupt, the lab's teardown still runs.
    with sigterm_as_interrupt(), NetnsLab(hosts=2) as lab:
        yield lab


@pytest.fixture(scope="session")
def virtual_lab(pytestconfig: pytest.Config) -> Iterator[VirtualLab]:
    """Two guests up (building the kernel first if it is not cached), down at the end
    (also when the run is stopped with SIGTERM)."""
    with sigterm_as_interrupt(), booted_lab(pytestconfig) as lab:
        yield lab


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    """A fresh SQLite reservation store, closed after the test."""
    s = open_store(str(tmp_path / "reservations.db"))
    yield s
    s.close()
