"""The timeout layers in a pytest session (:mod:`hil.timeouts`, docs/reliability.md).

- ``--hil-timeout-agent`` and ``--hil-timeout-step-slack`` set the agent call
  and step layers for the session.
- ``--hil-timeout-test`` is pytest-timeout's per-test ``timeout``; with an
  inventory and no timeout configured anywhere, a test gets the default one.
  The timer is this plugin's (pytest-timeout's ``pytest_timeout_set_timer``
  hook), with the signal method: the expiry fails the test with an exception,
  so its fixtures' teardown runs and the pair is still restored.  The bound
  covers setup and call; teardown, the restore, starts a fresh one as long.
- ``--hil-timeout-session``: a session that overruns stops after the test
  under way; the session's teardown restores the pair as at any end, and the
  summary says what stopped it.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable, Generator
from contextlib import ExitStack
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pytest

from hil.plugin import option_group, session_of
from hil.timeouts import DEFAULTS, configured, expired, seconds

if TYPE_CHECKING:
    from hil.run.testrun import TestRun


def pytest_addoption(parser: pytest.Parser) -> None:
    group = option_group(parser)
    group.addoption(
        "--hil-timeout-agent",
        type=seconds,
        metavar="SECONDS",
        help="Agent call layer: the bound of an agent call that names none "
        f"(default {DEFAULTS.agent_call_s:g}).",
    )
    group.addoption(
        "--hil-timeout-step-slack",
        type=seconds,
        metavar="SECONDS",
        help="Step layer: how much longer than its profile's bound a CM step waits "
        f"(default {DEFAULTS.step_slack_s:g}).",
    )
    group.addoption(
        "--hil-timeout-test",
        type=seconds,
        metavar="SECONDS",
        help="Test layer: each test's setup and call (pytest-timeout's --timeout; default "
        f"the ini's, else {DEFAULTS.test_s:g} with an inventory). Its fixtures still restore.",
    )
    group.addoption(
        "--hil-timeout-session",
        type=seconds,
        metavar="SECONDS",
        help="Session layer: past this, the session stops after the test under way, "
        "the pair restored (default: no bound; ci/nightly sets one inside its own).",
    )


def _has_test_timeout(config: pytest.Config) -> bool:
    return (
        config.getoption("timeout", None) is not None
        or bool(os.environ.get("PYTEST_TIMEOUT"))
        or bool(config.getini("timeout"))
    )


@pytest.hookimpl(tryfirst=True)  # before pytest-timeout's pytest_configure reads its timeout
def pytest_configure(config: pytest.Config) -> None:
    test_s = config.getoption("hil_timeout_test")
    if test_s is not None:
        if config.getoption("timeout", None) is not None:
            raise pytest.UsageError("give --hil-timeout-test or --timeout, not both")
        config.option.timeout = test_s
    elif (config.getoption("hil_inventory") or config.getoption("hil_lease")) and not (
        _has_test_timeout(config)
    ):
        config.option.timeout = DEFAULTS.test_s
    stack = ExitStack()
    stack.enter_context(
        configured(
            agent_call_s=config.getoption("hil_timeout_agent"),
            step_slack_s=config.getoption("hil_timeout_step_slack"),
        )
    )
    config.add_cleanup(stack.close)
    # The layers work in any session, with or without a pair (so not on its HilSession):
    # their state is an object of its own, registered beside the hooks below.
    config.pluginmanager.register(TimeoutState(), STATE_NAME)


STATE_NAME = "hil-timeout-state"


@dataclass
class TestClock:
    """The test layer's timer of one test: its bound, the phase it runs, how to stop it."""

    __test__ = False

    item: pytest.Item
    phase: str = "setup"
    armed: tuple[float, bool] | None = None  # the test's bound, whether to ignore a debugger
    cancel: Callable[[], None] | None = None

    def arm(self, seconds: float, ignore_debugger: bool) -> None:
        """SIGALRM in ``seconds`` fails the test (its phase named); :attr:`cancel` stops it."""
        item = self.item

        def handler(signum: int, frame: Any) -> None:
            if not ignore_debugger and sys.gettrace() is not None:
                return  # a debugger is stepping through the test
            _dump_other_threads()
            message = expired("test", seconds, f"{item.nodeid} to finish its {self.phase}")
            if self.phase != "teardown":
                message += "; its fixtures' teardown still runs"
            current = _current(item)
            if current is not None:
                current.timeout(message)
            # Capitalised as pytest-timeout's own: the report files a test failed with
            # "Failed: Timeout ..." under lab errors (hil.report.categories).
            pytest.fail(message[0].upper() + message[1:])

        def cancel() -> None:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, signal.SIG_DFL)

        self.cancel = cancel
        self.armed = (seconds, ignore_debugger)
        signal.signal(signal.SIGALRM, handler)
        signal.setitimer(signal.ITIMER_REAL, seconds)


class TimeoutState:
    """The test and session layers' state in one pytest session."""

    def __init__(self) -> None:
        self._clock: TestClock | None = None
        self.deadline: tuple[float, float] | None = None  # when the session layer fires, its bound
        self.stopped: str | None = None  # why the session layer stopped the session

    def clock(self, item: pytest.Item) -> TestClock:
        """The test layer's timer of ``item`` (a fresh one for a new test)."""
        if self._clock is None or self._clock.item is not item:
            self._clock = TestClock(item)
        return self._clock


def _state(config: pytest.Config) -> TimeoutState:
    state = config.pluginmanager.get_plugin(STATE_NAME)
    assert isinstance(state, TimeoutState)  # registered at configure time
    return state


# -- the test layer ----------------------------------------------------------


# optionalhook: pytest-timeout declares these; with it disabled (-p no:timeout) they are unused.
@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_timeout_set_timer(item: pytest.Item, settings: Any) -> bool | None:
    """pytest-timeout's timer, ours when its method is signal (the default) in the main
    thread: the expiry message names the layer, the test and its phase."""
    if settings.method != "signal" or threading.current_thread() is not threading.main_thread():
        return None  # pytest-timeout's own (the thread method ends the process: no restore)
    clock = _state(item.config).clock(item)
    clock.arm(float(settings.timeout), bool(settings.disable_debugger_detection))
    return True


@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_timeout_cancel_timer(item: pytest.Item) -> bool | None:
    clock = _state(item.config).clock(item)
    if clock.cancel is None:
        return None
    clock.cancel()
    clock.cancel = None
    return True


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_teardown(item: pytest.Item) -> None:
    # Teardown restores the pair: a test that overran must not cut it short, so it
    # gets a bound of its own, as long as the test's.
    clock = _state(item.config).clock(item)
    if clock.armed is not None and pytest_timeout_cancel_timer(item):
        clock.phase = "teardown"
        clock.arm(*clock.armed)


# -- an interrupted test ------------------------------------------------------


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, object, object]:
    """A lab session interrupted in a test's call (the nightly layer's SIGTERM, a CI
    runner's, Ctrl-C): that test fails saying so, not passed or lost, and the
    session stops after it, its teardown restoring the pair.  (Also marks the call
    phase for the test layer's message.)"""
    _state(item.config).clock(item).phase = "call"
    try:
        return (yield)
    except KeyboardInterrupt as e:
        if session_of(item.config) is None:
            raise
        why = str(e) or "Ctrl-C"
        current = _current(item)
        if current is not None:
            current.interrupt(why)
        item.session.shouldstop = f"interrupted ({why}) in {item.nodeid}"
        # "hil: <Class>: ": the report files it with the lab errors (hil.report.categories).
        pytest.fail(
            f"hil: Interrupted: {why}, in its call; the session stops after it and its "
            "teardown restores the pair",
            pytrace=False,
        )


# -- the session layer -------------------------------------------------------


def pytest_sessionstart(session: pytest.Session) -> None:
    seconds = session.config.getoption("hil_timeout_session")
    if seconds is None:
        seconds = DEFAULTS.session_s
    if seconds is not None:
        _state(session.config).deadline = (time.monotonic() + seconds, seconds)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(
    item: pytest.Item, nextitem: pytest.Item | None
) -> Generator[None, object, object]:
    result = yield
    _stop_if_overrun(item, nextitem)
    return result


def _stop_if_overrun(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    state = _state(item.config)
    deadline, seconds = state.deadline or (None, 0.0)
    if deadline is None or nextitem is None or time.monotonic() < deadline:
        return
    items = item.session.items
    left = len(items) - items.index(item) - 1
    message = (
        f"{expired('session', seconds, f'its {len(items)} tests', '--hil-timeout-session')}: "
        f"stopped after {item.nodeid}, {left} not run; the session's teardown restores "
        "the pair as at any end"
    )
    state.stopped = message
    item.session.shouldstop = message


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    message = _state(config).stopped
    if message is not None:
        terminalreporter.write_line(f"hil: {message}")


def _dump_other_threads() -> None:
    """Where every other thread is (the test's own place is the failure's traceback),
    into the test's captured stderr."""
    frames = sys._current_frames()
    for thread in threading.enumerate():
        frame = frames.get(thread.ident or -1)
        if thread is not threading.current_thread() and frame is not None:
            stack = "".join(traceback.format_stack(frame))
            print(f"thread {thread.name} at the timeout:\n{stack}", file=sys.stderr)


def _current(item: pytest.Item) -> TestRun | None:
    """The test's TestRun, when it runs on the pair."""
    hs = session_of(item.config)
    return None if hs is None else hs.current
