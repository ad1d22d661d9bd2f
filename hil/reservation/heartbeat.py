"""Keeping a lease alive from a background thread while its holder works."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from hil.errors import HilError, LeaseLost
from hil.reservation.model import Lease
from hil.reservation.open import open_store
from hil.reservation.store import Store

log = logging.getLogger(__name__)


class Heartbeat:
    """Renews ``lease`` every ttl/3 in a daemon thread.

    ``store`` is a ``Store`` (shared; stores are thread-safe) or a store URL
    (the thread opens and closes its own connection).  When the lease is
    lost, taken over or not renewable before it expires, ``lost`` is set and
    ``on_lost`` is called from the heartbeat thread; the thread then stops.
    Use as a context manager, or ``start()`` / ``stop()``.  It never releases
    the lease: that is the holder's call.
    """

    def __init__(
        self,
        store: Store | str | None,
        lease: Lease,
        on_lost: Callable[[LeaseLost], None] | None = None,
        interval: float | None = None,
    ) -> None:
        self.lease = lease
        self.lost: LeaseLost | None = None
        self.interval = interval if interval is not None else lease.ttl / 3
        self._store = store
        self._on_lost = on_lost
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> Heartbeat:
        """Start renewing (the first renewal happens at once)."""
        self._thread = threading.Thread(
            target=self._run, name=f"hil-heartbeat-{self.lease.id}", daemon=True
        )
        self._thread.start()
        return self

    def stop(self, timeout: float = 15.0) -> None:
        """Stop renewing and wait (bounded) for the thread to end."""
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def check(self) -> None:
        """Raise ``LeaseLost`` if the lease was lost."""
        if self.lost is not None:
            raise self.lost

    def __enter__(self) -> Heartbeat:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _run(self) -> None:
        shared = self._store if isinstance(self._store, Store) else None
        url = None if isinstance(self._store, Store) else self._store
        store = shared
        # Until a renewal succeeds, trust the lease for one TTL from now.
        deadline = time.monotonic() + self.lease.ttl
        try:
            while True:
                started = time.monotonic()
                try:
                    if store is None:
                        store = open_store(url)
                    self.lease = store.renew(self.lease.id)
                    deadline = started + self.lease.ttl
                    pause = self.interval
                except LeaseLost as e:
                    self._lose(e)
                    return
                except HilError as e:
                    if time.monotonic() >= deadline:
                        self._lose(
                            LeaseLost(
                                f"could not renew lease {self.lease.id} on pair {self.lease.pair} "
                                f"before it expired ({e}); another run may hold its hosts now: "
                                "stop using them and reserve again"
                            )
                        )
                        return
                    log.warning("renewing lease %s failed, retrying: %s", self.lease.id, e)
                    pause = min(self.interval, max(0.2, self.interval / 4))
                if self._stopping.wait(pause):
                    return
        finally:
            if store is not None and store is not shared:
                store.close()

    def _lose(self, error: LeaseLost) -> None:
        log.error("%s", error)
        self.lost = error
        if self._on_lost is not None:
            self._on_lost(error)
