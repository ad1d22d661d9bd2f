"""The controller's end of the reference peer (hil/agent/remote/peer/, docs/peer.md):
run a scenario on a host's agent, the DUT's steps run here between its segments.

    result = run_peer(agent, "active", "198.18.0.1", 7174, steps, timeout=30,
                      on_dut=lambda i, step: do_the_dut_action(step))

The peer runs its own steps (``send``, ``expect``, ``sleep``) on the host; at each
``dut`` step it stops, ``on_dut`` runs the DUT's action, and the peer resumes after
it.  ``on_dut`` may return the scenario's steps anew (values the DUT shared put in,
the same number of steps): the peer resumes with those.  ``on_dut`` raising ends the
peer's session (``peer_close``) and propagates.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hil.agent.calls import Caller, request
from hil.agent.protocol import (
    PEER_CLOSE,
    PEER_RESUME,
    PEER_RUN,
    PeerEntry,
    PeerReply,
    PeerResumeParams,
    PeerRole,
    PeerRunParams,
    PeerSessionParams,
    PeerUnmet,
)

DutHook = Callable[[int, dict[str, Any]], list[dict[str, Any]] | None]


@dataclass(frozen=True)
class PeerResult:
    """A scenario's whole run: every frame's record entry, the first unmet
    expectation, the step that could not run, and the connection's two ends."""

    record: list[PeerEntry]
    unmet: PeerUnmet | None
    error: str | None
    local: str
    remote: str


def run_peer(
    agent: Caller,
    role: PeerRole,
    address: str,
    port: int,
    steps: list[dict[str, Any]],
    timeout: float,
    on_dut: DutHook | None = None,
    drain_s: float = 0.0,
    src: str | None = None,
) -> PeerResult:
    """Run ``steps`` as the peer on ``agent``'s host, each segment within ``timeout``;
    ``on_dut(index, step)`` runs each ``dut`` step (none allowed without it); ``src``:
    the address an active peer connects from; ``drain_s``: how long the peer keeps
    recording what the DUT sends after the last step."""
    if on_dut is None and any(s.get("step") == "dut" for s in steps):
        raise ValueError("the scenario has dut steps: run_peer needs on_dut to run them")
    params: PeerRunParams = {
        "role": role,
        "address": address,
        "port": port,
        "steps": steps,
        "drain_s": drain_s,
        "src": src,
    }
    reply = request(agent, PEER_RUN, params, timeout)
    record = list(reply["record"])
    while reply["stopped_at"] is not None:
        assert on_dut is not None
        reply = _after_dut(agent, reply, steps, on_dut, timeout)
        record += reply["record"]
    return PeerResult(record, reply["unmet"], reply["error"], reply["local"], reply["remote"])


def _after_dut(
    agent: Caller, reply: PeerReply, steps: list[dict[str, Any]], on_dut: DutHook, timeout: float
) -> PeerReply:
    index = reply["stopped_at"]
    session: PeerSessionParams = {"session": reply["session"]}
    assert index is not None
    try:
        renewed = on_dut(index, steps[index])
    except BaseException:
        request(agent, PEER_CLOSE, session)
        raise
    resume: PeerResumeParams = {"session": reply["session"]}
    if renewed is not None:
        steps[:] = renewed
        resume["steps"] = renewed
    return request(agent, PEER_RESUME, resume, timeout)
