"""The plugin's state for one pytest session: the pair run it holds, and how.

Kept apart from the hooks so the reservation logic reads top to bottom.  The
chain itself (reserve, heartbeat, hosts, journal, setup, provider) is
:class:`hil.run.PairRun`'s; this only turns options into its request and its
failures into test outcomes, and says in the session output what the pair
really runs once it is set up (the header comes before the setup).
"""

from __future__ import annotations

import logging
import os
import threading
from contextlib import ExitStack, nullcontext
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pytest

from hil.errors import EXIT_INFRA, HilError, InputError
from hil.inventory import Inventory, Pair, load
from hil.inventory.require import parse_requirement, select
from hil.plugin.interrupt import sigterm_as_interrupt
from hil.reservation import Lease, open_store
from hil.reservation.store import Store
from hil.run import PairRequest, PairRun

if TYPE_CHECKING:
    from hil.host.liveness import Crash
    from hil.reservation.attempt import Attempt
    from hil.run.testparts import TestOptions
    from hil.run.testrun import TestRun

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Reserved:
    """What ``hil_pair`` gives a test: the pair, its lease, the inventory."""

    pair: Pair
    lease: Lease
    inventory: Inventory


@dataclass
class CrashState:
    """The session's crashes and the armed test (:mod:`hil.plugin.crash`)."""

    summary: list[str] = field(default_factory=list)
    armed: pytest.Item | None = None
    crash: Crash | None = None  # the test under way's, once its TestRun noticed one
    told: bool = False  # the test failed saying so already
    lock: threading.Lock = field(default_factory=threading.Lock)
    previous_handler: Any = None


class HilSession:
    """Reserve (or adopt) a pair at start, renew it, release it at the end."""

    def __init__(self, config: pytest.Config, inventory_path: str | None) -> None:
        self.config = config
        self.inventory_path = inventory_path
        self.reserved: Reserved | None = None
        self.run: PairRun | None = None
        self.error: HilError | None = None
        self.store: Store | None = None
        self.current: TestRun | None = None  # the test on the pair under way
        # Read from the options at configure time (hil.plugin.testrun), once.
        self.test_options: TestOptions | None = None
        self.crashes = CrashState()
        self.crashers: dict[str, Attempt] = {}  # nodeid -> its newest crash marker
        self._signals = ExitStack()

    def request(self) -> PairRequest:
        """The pair request the options stand for."""
        opt = self.config.getoption
        worker = os.environ.get("PYTEST_XDIST_WORKER")
        return PairRequest(
            pair=opt("hil_pair"),
            require=tuple(opt("hil_require")),
            lease=opt("hil_lease"),
            holder=f"pytest {worker}" if worker else "pytest",
            ttl=opt("hil_ttl"),
            wait=opt("hil_wait"),
            module_params=tuple(opt("hil_module_param")),
        )

    def describe_request(self) -> str:
        """The inventory and what we ask of it, for the header."""
        req = self.request()
        return req.describe() if req.lease else f"{self.inventory_path} ({req.describe()})"

    def start(self) -> None:
        """Reserve or adopt; a failure is kept and reported by ``hil_pair``.

        From here to :meth:`finish`, SIGTERM interrupts the run like Ctrl-C, so
        that the pair is restored and the lease released before the process ends.
        """
        self._signals.enter_context(sigterm_as_interrupt())
        try:
            self._start()
        except HilError as e:
            self.error = e

    def _start(self) -> None:
        if not self.inventory_path:
            raise InputError(
                "--hil-lease needs the inventory the lease was taken from: "
                "pass --hil-inventory FILE (or set HIL_INVENTORY)"
            )
        inventory = load(self.inventory_path)
        self.store = open_store(self.config.getoption("hil_store"))
        observers = [
            o for group in self.config.hook.pytest_hil_observers(config=self.config) for o in group
        ]
        self.run = PairRun(
            inventory, self.store, self.request(), observers=observers, progress=self.progress
        )
        lease = self.run.reserve()
        self.reserved = Reserved(self.run.pair, lease, inventory)

    def progress(self, message: str) -> None:
        """A ``hil: ...`` line in the session output, also from inside a test's setup."""
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is None:
            return
        # A fixture's output is captured (shown only if the test fails): write past it.
        capman = self.config.pluginmanager.get_plugin("capturemanager")
        with capman.global_and_fixture_disabled() if capman else nullcontext():
            reporter.write_line(f"hil: {message}")

    def header_lines(self) -> list[str]:
        """Lines for the session header: the pair and the holder, or the failure."""
        if self.error is not None:
            return [f"hil: no pair from {self.describe_request()}: {self.error}"]
        if self.reserved is None:
            return [f"hil: {self.describe_request()}"]
        lease = self.reserved.lease
        pair = self.reserved.pair
        how = "adopted" if self.request().lease else "reserved"
        return [
            f"hil: pair {pair.name} ({pair.link.a} <-> {pair.link.b}) {how}, "
            f"lease {lease.id} until {lease.expires.isoformat(timespec='seconds')}",
            f"hil: holder {lease.holder}",
        ]

    def require_run(self) -> PairRun:
        """The session's pair run, or a test failure saying why there is none."""
        if self.run is None or self.reserved is None:
            why = self.error or "the session did not reserve a pair"
            pytest.fail(f"hil: no pair from {self.describe_request()}: {why}", pytrace=False)
        return self.run

    def unmet(self, requirements: list[str]) -> str | None:
        """Why the reserved pair fails ``requirements``, or None when it meets them."""
        assert self.reserved is not None
        pair = self.reserved.pair
        for text in requirements:
            req = parse_requirement(text)
            if pair.name not in {p.name for p in select(self.reserved.inventory, [req])}:
                return f"pair {pair.name} does not meet {text}"
        return None

    def stop_if_lease_lost(self) -> None:
        """End the run when the heartbeat found our lease taken over."""
        lost = None if self.run is None else self.run.lease_lost
        if lost is not None:
            pytest.exit(f"hil: {lost}", returncode=EXIT_INFRA)

    def finish(self) -> None:
        """Restore what is left, stop renewing, release unless the lease was adopted."""
        try:
            if self.run is not None:
                self.run.close()
        except HilError as e:
            self.progress(f"could not restore or release the pair: {e}")
        finally:
            if self.store is not None:
                self.store.close()
            self._signals.close()
