"""The kernel under test, for every test that sets the pair up.

- a ``kernel`` label on the test: the release the pair's hosts run (``uname -r``,
  read once per session), so that a nightly over a kernel matrix
  (``ci/nightly --kernels 6.1,6.12``) shows which kernel each result ran on (a
  test skipped for what the pair lacks too: :func:`label_skipped`);
- on hosts whose kernel runs kmemleak (the debug lab, ``hil lab up --debug``): a
  kmemleak scan after the test, before the after-test kernel-log check reads the
  log, so a leak the test made fails it there (``kmemleak: N new suspected memory
  leaks``) with the leaked objects' report attached (:mod:`hil.host.kmemleak`).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from hil import tools
from hil.errors import HilError
from hil.host import kmemleak
from hil.host.evidence import each
from hil.report import attach
from hil.report.crash import crashed

if TYPE_CHECKING:
    from hil.run import PairRun

# Per session: the kernel releases of the pair, and its hosts that run kmemleak.
RELEASES_KEY = pytest.StashKey[tuple[str, ...]]()
KMEMLEAK_KEY = pytest.StashKey[tuple[str, ...]]()
UNAME_TIMEOUT = 30.0


@pytest.fixture(autouse=True)
def hil_kernel(request: pytest.FixtureRequest) -> Iterator[None]:
    """Label the test with the pair's kernel; scan kmemleak after it where the kernel has it."""
    if "hil_setup" not in request.fixturenames:
        yield
        return
    # Set up before us, so torn down after us: the kernel-log check sees our scan's line.
    request.getfixturevalue("after_test_checks")
    run: PairRun = request.getfixturevalue("hil_run")
    for release in releases(request.config, run):
        attach.label("kernel", release)
    leaky = _kmemleak_hosts(request.config, run)
    yield
    ended = time.monotonic()
    if not leaky or crashed(request.node) is not None:
        return
    # Both hosts at once: a scan takes 30-55 s in a TCG guest of the debug kernel.
    reports = each(
        {name: name for name in leaky},
        lambda name: kmemleak.scan(run.hosts.agent(name), name, since=ended),
    )
    for name, report in reports.items():
        if report:
            attach.note(f"kmemleak report of {name}", report)
            request.node.add_report_section("teardown", f"kmemleak {name}", report)


def label_skipped(config: pytest.Config, run: PairRun) -> None:
    """The ``kernel`` label of a test skipped before its setup (the pair lacks what it
    requires), so that every result of a matrix night names its kernel."""
    try:
        found = releases(config, run)
    except HilError:
        return  # a host out of reach: the next test's setup says so
    for release in found:
        attach.label("kernel", release)


def releases(config: pytest.Config, run: PairRun) -> tuple[str, ...]:
    """The kernel releases the pair's hosts run (``uname -r``), read once per session."""
    if RELEASES_KEY not in config.stash:
        found = set()
        for host in run.pair.hosts:
            out = run.hosts.agent(host.name).run(tools.argv("uname", "-r"), timeout=UNAME_TIMEOUT)
            found.add(out.stdout.strip() if out.status == 0 else f"unknown on {host.name}")
        config.stash[RELEASES_KEY] = tuple(sorted(found))
    return config.stash[RELEASES_KEY]


def _kmemleak_hosts(config: pytest.Config, run: PairRun) -> tuple[str, ...]:
    """The pair's hosts that run kmemleak; the first time, what boot leaked is cleared."""
    if KMEMLEAK_KEY not in config.stash:
        names = tuple(h.name for h in run.pair.hosts if kmemleak.available(run.hosts.agent(h.name)))
        for name in names:
            kmemleak.clear(run.hosts.agent(name), name)
        config.stash[KMEMLEAK_KEY] = names
    return config.stash[KMEMLEAK_KEY]
