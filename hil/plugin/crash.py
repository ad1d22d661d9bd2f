"""Crashes during a test: notice them, end the test, recover or quarantine, go on or stop.

For every test on the pair (it uses ``hil_setup`` or ``hil_hosts``):

- **attempt marker**: before the test, the store records that it is being
  tried on the pair (:meth:`Store.begin_attempt`); after, how it ended
  (``passed``, ``failed``, ``skipped``, ``host crashed``).  A marker a dead
  run left open on the pair's hosts is reported at the next session's
  start (it names the test the run died in) and closed as ``run died``;
- **a test that crashed a host before** (its newest marker on the pair's
  hosts ended ``host crashed``) is skipped, saying so, unless
  ``--hil-rerun-crashers``;
- **watch** (:class:`hil.host.liveness.Watch`) during the test's call: the
  kernel log of both hosts and a liveness probe, bound ``--hil-liveness``.
  A panic, an oops or a host silent past the bound ends the test at once
  (a signal to the main thread fails it wherever it waits) with
  ``hil: HostCrashed: HOST: host crashed (...) during TEST: ...``, its own
  report category, and the host's last kernel log lines attached: those the
  agent streamed, or a virtual lab guest's console when it has more;
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
from collections.abc import Generator
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

import pytest

from hil.errors import HilError
from hil.host.liveness import DEFAULT_BOUND, Crash, Watch
from hil.plugin import SESSION_KEY, option_group
from hil.report.crash import CRASH_KEY, attach_crash, crashed, message
from hil.timeouts import seconds

if TYPE_CHECKING:
    from hil.plugin.session import HilSession
    from hil.reservation.attempt import Attempt
    from hil.run import PairRun

log = logging.getLogger(__name__)

CRASH_SIGNAL = signal.SIGUSR1  # how the watch's thread ends the test in the main thread
HOST_CRASHED = "host crashed"  # the attempt marker's outcome
RUN_DIED = "run died"
CONSOLE_LINES = 40
RECOVER_TIMEOUT = 600.0
_STATE = pytest.StashKey["CrashState"]()
_OUTCOMES = pytest.StashKey[dict[str, str]]()
_CONSOLE_AT = pytest.StashKey[dict[str, int]]()  # each lab guest's console size at the call
# Ends of a call that are no failure of the test: skip, exit, Ctrl-C or SIGTERM.
_NOT_FAILURES = (pytest.skip.Exception, pytest.exit.Exception, KeyboardInterrupt)


@dataclass
class CrashState:
    """The session's crashes, the crashers known from earlier runs, and the armed test."""

    crashers: dict[str, Attempt] | None = None  # nodeid -> its newest "host crashed" marker
    summary: list[str] = field(default_factory=list)
    armed: pytest.Item | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)
    previous_handler: Any = None


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
        "--hil-rerun-crashers",
        action="store_true",
        help="Run tests that crashed a host of the pair before (skipped otherwise).",
    )
    group.addoption(
        "--hil-recover-timeout",
        type=seconds,
        default=RECOVER_TIMEOUT,
        metavar="SECONDS",
        help="Bound of recovering a crashed host (power cycle, SSH, journal, health check; "
        f"default {RECOVER_TIMEOUT:g}).",
    )


def _hil(config: pytest.Config) -> HilSession | None:
    return config.stash.get(SESSION_KEY, None)


def _on_pair(item: pytest.Item) -> bool:
    names = set(getattr(item, "fixturenames", ()))
    return bool({"hil_setup", "hil_hosts"} & names)


def _run(item: pytest.Item) -> PairRun | None:
    hs = _hil(item.config)
    return None if hs is None or hs.reserved is None else hs.run


@pytest.hookimpl(trylast=True)  # after the plugin's own made the session (SESSION_KEY)
def pytest_configure(config: pytest.Config) -> None:
    if _hil(config) is None:
        return
    state = CrashState()
    config.stash[_STATE] = state
    # Installed for the whole session and only ever firing into an armed test: putting
    # the default back between tests could let a late signal end the process.
    if threading.current_thread() is threading.main_thread():
        state.previous_handler = signal.signal(CRASH_SIGNAL, _make_handler(state))


def pytest_unconfigure(config: pytest.Config) -> None:
    state = config.stash.get(_STATE, None)
    if state is not None and state.previous_handler is not None:
        signal.signal(CRASH_SIGNAL, state.previous_handler)


def _make_handler(state: CrashState) -> Any:
    def handler(signum: int, frame: FrameType | None) -> None:
        # No lock: the handler runs in the main thread, which may hold it (disarming).
        item = state.armed
        crash = None if item is None else crashed(item)
        if item is None or crash is None:
            return  # a late signal: the test it was for is over
        pytest.fail(message(crash, item.nodeid), pytrace=False)

    return handler


# -- the session's start: dead runs' markers, earlier crashers -------------------


def pytest_hil_reserved(config: pytest.Config, pair: str) -> None:
    hs, state = _hil(config), config.stash.get(_STATE, None)
    if hs is None or hs.store is None or hs.run is None or state is None:
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
        crashers: dict[str, Attempt] = {}
        for attempt in hs.store.attempts(hosts=hosts, outcome=HOST_CRASHED, limit=1000):
            crashers.setdefault(attempt.test, attempt)  # newest first
        state.crashers = crashers
    except HilError as e:
        hs.progress(f"could not read the attempt markers: {e}")


# -- each test ------------------------------------------------------------------


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(
    item: pytest.Item, nextitem: pytest.Item | None
) -> Generator[None, object, object]:
    """The attempt marker around the test; after a crash, recovery or a clean stop."""
    run, hs = _run(item), _hil(item.config)
    attempt = None
    if run is not None and hs is not None and hs.store is not None and _on_pair(item):
        attempt = _begin_attempt(hs, run, item)
    try:
        return (yield)
    finally:
        crash = crashed(item)
        if attempt is not None and hs is not None and hs.store is not None:
            _end_attempt(hs, attempt, HOST_CRASHED if crash else _outcome(item))
        if crash is not None and run is not None and hs is not None:
            _after_crash(item, hs, run, crash)


def _begin_attempt(hs: HilSession, run: PairRun, item: pytest.Item) -> int | None:
    assert hs.store is not None and hs.reserved is not None
    a, b = (h.name for h in run.pair.hosts)
    try:
        attempt = hs.store.begin_attempt(item.nodeid, run.pair.name, (a, b), hs.reserved.lease.id)
    except HilError as e:
        log.warning("could not record the attempt of %s: %s", item.nodeid, e)
        return None
    return attempt


def _end_attempt(hs: HilSession, attempt: int, outcome: str) -> None:
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
    outcomes = item.stash.setdefault(_OUTCOMES, {})
    outcomes[report.when] = report.outcome
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
    state = item.config.stash.get(_STATE, None)
    if state is None or not state.crashers or item.config.getoption("hil_rerun_crashers"):
        return
    attempt = state.crashers.get(item.nodeid)
    if attempt is not None and _on_pair(item):
        pytest.skip(
            f"hil: not run: it crashed a host before ({attempt}); "
            "--hil-rerun-crashers runs it again"
        )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, object, object]:
    """Watch the pair's hosts during the call; a crash fails the test at once."""
    watch = _start_watch(item)
    if watch is None:
        return (yield)
    state = item.config.stash[_STATE]
    try:
        result = yield
    except _NOT_FAILURES:
        raise
    except BaseException:
        _disarm(state)
        # Failed on its own: was it because a host went down? Ask the watch first.
        if crashed(item) is None and watch.confirm() is None:
            raise
        result = None
    finally:
        _disarm(state)
        watch.stop()
    crash = crashed(item) or watch.crash
    if crash is None:
        return result
    crash = _with_console(item, crash)
    item.stash[CRASH_KEY] = crash
    attach_crash(crash)
    # The watch's signal may have come too late to end the call (or found it over).
    pytest.fail(message(crash, item.nodeid), pytrace=False)


def _disarm(state: CrashState) -> None:
    """No signal into the main thread from here on (the watch may still look)."""
    with state.lock:
        state.armed = None


def _start_watch(item: pytest.Item) -> Watch | None:
    bound = item.config.getoption("hil_liveness")
    run, state = _run(item), item.config.stash.get(_STATE, None)
    if not bound or run is None or state is None or not _on_pair(item):
        return None
    if threading.current_thread() is not threading.main_thread():
        return None
    main = threading.main_thread().ident
    assert main is not None

    def on_crash(crash: Crash) -> None:
        with state.lock:
            if state.armed is not item:
                return
            item.stash[CRASH_KEY] = crash
            signal.pthread_kill(main, CRASH_SIGNAL)
        # The test's own cleanup (closing its CM endpoints) must not wait out a call bound
        # on the dead host: with its agent and session dropped, those calls fail at once.
        hosts.forget(crash.host)

    names = [h.name for h in run.pair.hosts]
    hosts = run.hosts
    try:
        watch = Watch(hosts, names, on_crash, bound=bound).start()
    except HilError as e:
        log.warning("no crash watch for %s: %s", item.nodeid, e)
        return None
    item.stash[_CONSOLE_AT] = _console_sizes(item)
    with state.lock:
        state.armed = item
    return watch


def _consoles(item: pytest.Item) -> dict[str, Path]:
    """Each virtual lab guest's console log, when the inventory is a lab's (none else)."""
    path = item.config.getoption("hil_inventory")
    if not path:
        return {}
    from hil.lab.state import load

    try:
        lab = load(Path(path).parent)
    except HilError:
        return {}
    return {} if lab is None else {g.name: Path(g.log) for g in lab.guests}


def _console_sizes(item: pytest.Item) -> dict[str, int]:
    """Where each guest's console ends now: what it takes after is the test's."""
    sizes = {}
    for host, log_path in _consoles(item).items():
        try:
            sizes[host] = log_path.stat().st_size
        except OSError:
            continue
    return sizes


def _with_console(item: pytest.Item, crash: Crash) -> Crash:
    """The crash with a virtual lab guest's console tail, when the lab keeps one."""
    log_path = _consoles(item).get(crash.host)
    if log_path is None:
        return crash
    try:
        data = log_path.read_bytes()
    except OSError:
        return crash
    since = item.stash.get(_CONSOLE_AT, {}).get(crash.host, len(data))
    tail = data.decode(errors="replace").splitlines()[-CONSOLE_LINES:]
    fresh = data[since:].decode(errors="replace").splitlines()
    return crash.with_console(tail, f"console {log_path}", fresh)


# -- after the crashed test ---------------------------------------------------------


def _after_crash(item: pytest.Item, hs: HilSession, run: PairRun, crash: Crash) -> None:
    """Record the host's failure; recover it and set the pair up again, or quarantine it
    and stop the session."""
    from hil.host.healthcheck import note_failure
    from hil.host.power import may_cycle

    assert hs.store is not None
    store = hs.store
    state = item.config.stash[_STATE]
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
    from hil.host.recovery import recover

    assert hs.store is not None
    hs.progress(f"host {crash}: recovering it")
    try:
        recover(
            run.hosts,
            hs.store,
            crash.host,
            fence=run.fence,  # a run that lost its pair cycles nothing
            say=hs.progress,
            timeout=item.config.getoption("hil_recover_timeout"),
        )
        # The recovered host's journal was replayed; the other's is undone here.
        run.restore()
        run.set_up()
    except HilError as e:
        hs.progress(f"host {crash.host}: {e}")
        return str(e)
    hs.progress(f"pair {run.pair.name} set up again after recovering {crash.host}")
    return None


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    state = config.stash.get(_STATE, None)
    for line in [] if state is None else state.summary:
        terminalreporter.write_line(f"hil: {line}")
