"""CM endpoints kept across recordings: one idle worker per host, handed to the next
recording that asks for an endpoint there instead of a new one.

A worker's start and its orderly end cost 0.19 s and 0.09 s on the lab's TCG guests
(python and librdmacm in a new process, then its exit): a fuzz case paid them three
times (its DUT endpoint, its normal connect's two), a fifth of the case (profiled on
the lab, docs/peer.md "Fuzzing").  A recording made with a pool
(:class:`hil.cm.recording.Recording`) takes an idle worker for its host, and on exit
releases it (:meth:`hil.cm.endpoint.Endpoint.release`: every cm_id it still holds
destroyed, as the worker's own close would destroy them) back into the pool; a worker
whose release fails is closed as before.

The pool's workers live across tests, so the after-test checks' baseline must hold
them as they idle: :meth:`EndpointPool.warm` starts one per host and has it bind a
listener on its port's address once, so that librdmacm has opened the device (a
device context it keeps for the process), before the first test's baseline.  What a
case leaves in a worker beyond that (an id not destroyed, a QP) still counts against
the baseline.  For recordings whose steps neither pause an endpoint nor leave a stream
running (a fuzz case's, hil/run/peercase.py): a release does not undo those.
"""

from __future__ import annotations

import logging
import threading
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Protocol

from hil.judge.timeline import SIDES

if TYPE_CHECKING:
    from hil.cm.endpoint import Endpoint

log = logging.getLogger(__name__)


class _Recording(Protocol):
    def endpoint(self, side: str) -> Endpoint: ...


class _Session(Protocol):
    """What :meth:`EndpointPool.warm` needs of a session (hil.cm.sides.PairSides)."""

    def recording(
        self, scenario: str, pool: EndpointPool | None = None
    ) -> AbstractContextManager[_Recording]: ...

    def address(self, side: str) -> str: ...

    def port(self) -> int: ...


class EndpointPool:
    """Idle CM endpoints by host, for the recordings that share this pool."""

    def __init__(self) -> None:
        self._idle: dict[str, Endpoint] = {}
        self._lock = threading.Lock()

    def take(self, host: str) -> Endpoint | None:
        """The idle endpoint on ``host``, out of the pool; None when there is none."""
        with self._lock:
            return self._idle.pop(host, None)

    def give_back(self, ep: Endpoint) -> None:
        """Keep a released endpoint for the next recording (one per host: a second is
        closed)."""
        with self._lock:
            spare = self._idle.get(ep.host)
            if spare is None:
                self._idle[ep.host] = ep
                return
        ep.close()

    def warm(self, session: _Session) -> None:
        """An idle worker on each host of ``session``'s pair, each having bound a listener
        on its port's address once (the module doc: the baseline then holds what it
        keeps)."""
        with session.recording("endpoint pool warm-up", pool=self) as rec:
            for side in SIDES:
                ep = rec.endpoint(side)
                out = ep.listen(session.address(side), session.port())
                if out.ok and out.id is not None:
                    ep.destroy(out.id)

    def close(self) -> None:
        """End every idle worker (a failure is logged: the agent ends them at its exit)."""
        with self._lock:
            idle, self._idle = list(self._idle.values()), {}
        for ep in idle:
            try:
                ep.close()
            except Exception as e:  # noqa: BLE001 -- close the others all the same
                log.warning("%s: closing pooled CM endpoint %s failed: %s", ep.host, ep.number, e)
