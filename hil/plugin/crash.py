"""Crashes during a test: notice them, end the test, recover or quarantine, go on or stop.

For every test on the pair (it uses ``hil_setup`` or ``hil_hosts``; its attempt
marker is :mod:`hil.plugin.attempts`'):

- **watch** (:class:`hil.host.liveness.Watch`, run by the test's
  :class:`~hil.run.testrun.TestRun`) from the test's setup to the end of its
  teardown, the settle and the after-test checks included: the kernel log of
  both hosts and a liveness probe, bound ``--hil-liveness``.  A panic, an
  oops or a host silent past the bound ends the test at once (a signal to
  the main thread fails it wherever it waits; in the after-test stages, the
  TestRun skips every stage that would ask the hosts) with
  ``hil: HostCrashed: HOST: host crashed (...) during TEST: ...``, its own
  report category, and the host's last kernel log lines attached: those the
  agent streamed, or a virtual lab guest's console when it has more
  (:mod:`hil.plugin.consoles`);
- **after the test**: the host's failure is recorded (``kernel_crash`` or
  ``unreachable``); a host whose inventory ``power:`` lets hil cycle it is
  recovered (:func:`hil.host.recovery.recover`: cycle, SSH, journal, health
  check) and the pair set up again, and the session goes on; any other
  host, or one whose recovery fails, is quarantined and the session stops
  after this test, its teardown restoring what it can.  The summary says
  which.
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable, Generator
from types import FrameType
from typing import TYPE_CHECKING, Any

import pytest

from hil.errors import HilError
from hil.host.liveness import DEFAULT_BOUND, Crash
from hil.plugin import option_group, session_of
from hil.plugin.attempts import pair_run
from hil.timeouts import seconds

if TYPE_CHECKING:
    from hil.plugin.session import CrashState, HilSession
    from hil.run import PairRun

log = logging.getLogger(__name__)

CRASH_SIGNAL = signal.SIGUSR1  # how the watch's thread ends the test in the main thread
RECOVER_TIMEOUT = 600.0
# Ends of a call that are no failure of the test: skip, exit, Ctrl-C or SIGTERM.
_NOT_FAILURES = (pytest.skip.Exception, pytest.exit.Exception, KeyboardInterrupt)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = option_group(parser)
    group.addoption(
        "--hil-liveness",
        type=seconds,
        default=DEFAULT_BOUND,
        metavar="SECONDS",
        help="A host of the pair that answers neither its agent nor SSH for this long during "
        f"a test is taken as crashed (default {DEFAULT_BOUND:g}; 0: no crash watch).",
    )
    group.addoption(
        "--hil-recover-timeout",
        type=seconds,
        default=RECOVER_TIMEOUT,
        metavar="SECONDS",
        help="Bound of recovering a crashed host (power cycle, SSH, journal, health check; "
        f"default {RECOVER_TIMEOUT:g}).",
    )


@pytest.hookimpl(trylast=True)  # after the plugin's own made the session (SESSION_KEY)
def pytest_configure(config: pytest.Config) -> None:
    hs = session_of(config)
    if hs is None:
        return
    state = hs.crashes
    # Installed for the whole session and only ever firing into an armed test: putting
    # the default back between tests could let a late signal end the process.
    if threading.current_thread() is threading.main_thread():
        state.previous_handler = signal.signal(CRASH_SIGNAL, _make_handler(state))


def pytest_unconfigure(config: pytest.Config) -> None:
    state = _state(config)
    if state is not None and state.previous_handler is not None:
        signal.signal(CRASH_SIGNAL, state.previous_handler)


def _make_handler(state: CrashState) -> Any:
    def handler(signum: int, frame: FrameType | None) -> None:
        # No lock: the handler runs in the main thread, which may hold it (disarming).
        item, crash = state.armed, state.crash
        if item is None or crash is None:
            return  # a late signal: the test it was for is over
        state.told = True
        pytest.fail(crash.message(item.nodeid), pytrace=False)

    return handler


def _state(config: pytest.Config) -> CrashState | None:
    """The session's crash state, when the plugin is active."""
    hs = session_of(config)
    return None if hs is None else hs.crashes


# -- each test ------------------------------------------------------------------
# The watch itself is the test's TestRun's (hil.run.testrun): the plugin's test fixture
# (hil.plugin.testrun) gives it :func:`signaller`, arms the test for the call and its
# fixtures, and disarms it before the TestRun's own after-test stages, which notice a
# crash there themselves (the fixture then fails the test saying so).


def crashed(config: pytest.Config) -> Crash | None:
    """The crash of a pair host under the test under way (or just over), once noticed."""
    state = _state(config)
    return None if state is None else state.crash


def signaller(item: pytest.Item) -> Callable[[Crash], None] | None:
    """What the TestRun's watch calls on a crash: keep it, end the armed test at once."""
    state = _state(item.config)
    if state is None or threading.current_thread() is not threading.main_thread():
        return None
    state.crash, state.told = None, False  # a new test
    main = threading.main_thread().ident
    assert main is not None

    def on_crash(crash: Crash) -> None:
        with state.lock:
            state.crash = crash
            if state.armed is item:
                signal.pthread_kill(main, CRASH_SIGNAL)

    return on_crash


def arm(item: pytest.Item) -> None:
    """From now on a crash ends ``item`` at once (a signal to the main thread)."""
    state = _state(item.config)
    if state is None:
        return
    with state.lock:
        state.armed = item


def disarm(item: pytest.Item) -> None:
    """No signal into the main thread from here on (the watch may still look)."""
    state = _state(item.config)
    if state is not None:
        with state.lock:
            state.armed = None


def noticed(item: pytest.Item, crash: Crash) -> str | None:
    """Keep a crash the test's TestRun told; the test's failure message, or None when the
    test failed saying so already."""
    state = _state(item.config)
    if state is None:
        return crash.message(item.nodeid)
    state.crash = crash
    if state.told:
        return None
    state.told = True
    return crash.message(item.nodeid)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(
    item: pytest.Item, nextitem: pytest.Item | None
) -> Generator[None, object, object]:
    """After a crash: the host recovered and the pair set up again, or a clean stop."""
    try:
        return (yield)
    finally:
        crash, run, hs = crashed(item.config), pair_run(item), session_of(item.config)
        if crash is not None and run is not None and hs is not None and hs.store is not None:
            _after_crash(item, hs, run, crash)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, object, object]:
    """A call that failed because a host went down fails saying so."""
    hs = session_of(item.config)
    t = None if hs is None else hs.current
    if t is None:
        return (yield)
    error: BaseException | None = None
    try:
        result = yield
    except _NOT_FAILURES:
        raise
    except BaseException as e:
        disarm(item)
        # Failed on its own: was it because a host went down? Ask the watch first.
        if t.confirm_crash() is None:
            raise
        result, error = None, e
    crash = t.crashed
    if crash is None:
        return result
    why = noticed(item, crash)
    if why is None:  # the watch's signal ended the call, saying so
        if error is None:
            return result
        if isinstance(error, pytest.fail.Exception):
            raise error
        # Something the signal unwound through (a cleanup on the dead host) raised its
        # own error in place of the crash's: the test still failed because of the crash.
        why = crash.message(item.nodeid)
    # The watch's signal may have come too late to end the call (or found it over).
    pytest.fail(why, pytrace=False)


# -- after the crashed test ---------------------------------------------------------


def _after_crash(item: pytest.Item, hs: HilSession, run: PairRun, crash: Crash) -> None:
    """Record the host's failure; recover it and set the pair up again, or quarantine it
    and stop the session."""
    from hil.host.healthcheck import note_failure
    from hil.host.power import may_cycle

    assert hs.store is not None
    store = hs.store
    state = hs.crashes
    note_failure(store, crash.host, crash.kind, f"during {item.nodeid}: {crash.detail}")
    head = f"host {crash}, during {item.nodeid}"
    if may_cycle(run.inventory.host(crash.host)):
        why = _recover(item, hs, run, crash)
        if why is None:
            state.summary.append(f"{head}: recovered, the pair set up again; the session went on")
            return
    else:
        why = "its inventory entry has no power: that hil may cycle"
    reason = f"crashed during {item.nodeid} ({crash.detail}); not recovered: {why}"
    try:
        store.quarantine_host(crash.host, reason)
    except HilError as e:
        log.warning("%s: could not quarantine: %s", crash.host, e)
    items = item.session.items
    left = len(items) - items.index(item) - 1 if item in items else 0
    stop = f"{head}: quarantined ({why}); the session stopped after it, {left} not run"
    state.summary.append(stop)
    item.session.shouldstop = stop


def _recover(item: pytest.Item, hs: HilSession, run: PairRun, crash: Crash) -> str | None:
    """Recover the host, then restore and set up the pair again; why not, or None."""
    hs.progress(f"host {crash}: recovering it")
    try:
        timeout = item.config.getoption("hil_recover_timeout")
        run.recover(crash.host, say=hs.progress, timeout=timeout)
    except HilError as e:
        hs.progress(f"host {crash.host}: {e}")
        return str(e)
    hs.progress(f"pair {run.pair.name} set up again after recovering {crash.host}")
    return None


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    state = _state(config)
    for line in [] if state is None else state.summary:
        terminalreporter.write_line(f"hil: {line}")
