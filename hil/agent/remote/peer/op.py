"""The agent's methods for the reference peer (declared in protocol/peer.py).

``peer_run`` makes an endpoint and runs a scenario's steps until the end or a ``dut``
step; stopped at one, its session waits for ``peer_resume`` (after the controller ran
the DUT's action) or ``peer_close``.  Sessions live in this agent process; the agent's
shutdown closes whatever is left (``close_all``).  A bad scenario (not a list of steps,
a bad role or address) is a ``bad_params`` error; a step that cannot run (an override
that cannot be encoded, no connection in time) ends the session with ``error`` set.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable
from typing import Any

from ...protocol import MethodName, PeerReply, PeerRole
from ...protocol.frames import FrameError
from ..errors import OpError, held
from .endpoint import Endpoint, PeerError
from .scenario import Interpreter, check_steps

_sessions: dict[int, Interpreter] = {}
_lock = threading.Lock()
_ids = itertools.count(1)
_cursor: dict[int, int] = {}  # session -> record entries already returned
_drain: dict[int, float] = {}


def peer_run(
    role: PeerRole,
    address: str,
    port: int,
    steps: list[dict[str, Any]],
    timeout: float,
    src: str | None = None,
    drain_s: float = 0.0,
) -> PeerReply:
    """Run ``steps`` as the peer in ``role`` against ``address:port`` until the end or
    a ``dut`` step, within ``timeout``; the record so far."""
    deadline = time.monotonic() + timeout
    try:
        checked = check_steps(steps)
        endpoint = Endpoint(role, address, port, src)
    except (FrameError, PeerError) as e:
        raise OpError("bad_params", f"peer_run: {e}") from None
    session = next(_ids)
    with _lock:
        _sessions[session] = Interpreter(endpoint, checked)
        _cursor[session] = 0
        _drain[session] = drain_s
    return _segment(session, deadline)


def peer_resume(
    session: int, timeout: float, steps: list[dict[str, Any]] | None = None
) -> PeerReply:
    """Run ``session``'s steps on after the ``dut`` step it stopped at; ``steps``: the
    scenario anew (as many steps), values the DUT shared at that step put in."""
    if steps is not None:
        interp = held(_sessions, _lock, session, f"no peer session {session}")
        try:
            interp.renew(check_steps(steps))
        except FrameError as e:
            raise OpError("bad_params", f"peer_resume: {e}") from None
    return _segment(session, time.monotonic() + timeout)


def peer_close(session: int) -> PeerReply:
    """End ``session`` now (its socket closed); the record entries not yet returned."""
    interp = held(_sessions, _lock, session, f"no peer session {session}")
    interp.endpoint.close()
    return _reply(session, {"stopped_at": None, "unmet": None, "error": None}, last=True)


def _segment(session: int, deadline: float) -> PeerReply:
    interp = held(_sessions, _lock, session, f"no peer session {session}")
    outcome = interp.run(deadline)
    last = outcome["stopped_at"] is None
    if last:
        _drain_then_close(interp, min(deadline, time.monotonic() + _drain.get(session, 0.0)))
    return _reply(session, outcome, last)


def _drain_then_close(interp: Interpreter, until: float) -> None:
    """Keep recording what the DUT sends until ``until`` or its close; then close."""
    while time.monotonic() < until and interp.endpoint.read(until) is not None:
        pass
    interp.endpoint.close()


def _reply(session: int, outcome: dict[str, Any], last: bool) -> PeerReply:
    interp = held(_sessions, _lock, session, f"no peer session {session}")
    with _lock:
        start = _cursor[session]
        record: list[Any] = interp.endpoint.record[start:]
        _cursor[session] = start + len(record)
        if last:
            del _sessions[session], _cursor[session], _drain[session]
    return {
        "session": session,
        "local": interp.endpoint.local,
        "remote": interp.endpoint.remote,
        "record": record,
        "stopped_at": outcome["stopped_at"],
        "unmet": outcome["unmet"],
        "error": outcome["error"],
    }


def close_all() -> None:
    """Close every session's sockets (the agent is exiting)."""
    with _lock:
        interps = list(_sessions.values())
        _sessions.clear()
    for interp in interps:
        interp.endpoint.close()


METHODS: dict[MethodName, Callable[..., object]] = {
    "peer_run": peer_run,
    "peer_resume": peer_resume,
    "peer_close": peer_close,
}
