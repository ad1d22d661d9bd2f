"""The reference peer against itself over 127.0.0.1: one active, one passive, each running
a scenario (hil/agent/remote/peer/endpoint.py, scenario.py); for the peer's offline tests."""

from __future__ import annotations

import threading
import time
from typing import Any

from hil.agent.remote.peer.endpoint import Endpoint
from hil.agent.remote.peer.scenario import Interpreter, Outcome

Steps = list[dict[str, Any]]
CLEAN: Outcome = {"stopped_at": None, "unmet": None, "error": None}


def run_both(
    active: Steps, passive: Steps, timeout: float = 10
) -> tuple[list[Outcome], tuple[Interpreter, ...]]:
    """Run the two scenarios against each other; their outcomes and interpreters, once done."""
    server = Endpoint("passive", "127.0.0.1", 0)
    port = int(server.local.rsplit(":", 1)[1])
    runs = (
        Interpreter(Endpoint("active", "127.0.0.1", port), active),
        Interpreter(server, passive),
    )
    outcomes: list[Outcome] = []
    threads = [
        threading.Thread(target=lambda r=r: outcomes.append(r.run(time.monotonic() + timeout)))
        for r in runs
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout + 5)
    for r in runs:
        r.endpoint.close()
    return outcomes, runs
