"""The reference peer (remote/peer/, docs/peer.md): a scenario run by a pure-Python
iWARP endpoint on the host, in segments between the DUT's steps.

``peer_run`` makes the endpoint (active: it connects to ``address:port``; passive: it
listens there, port 0 picking one, and accepts one connection) and runs ``steps`` until
the end or a ``dut`` step.  Stopped at a ``dut`` step, the session stays open: the
controller runs the DUT's action, then ``peer_resume`` runs on after it.  A session
that ended (its last step, an unmet expectation, an error) is closed; ``peer_close``
ends one early.  Each reply carries the record entries made since the last one."""

from __future__ import annotations

from typing import Any, Literal, TypedDict, get_args

from .spec import Method

__all__ = [
    "PeerRole", "PeerOpcode", "RtrKind", "PEER_OPCODES", "RTR_KINDS", "PeerEntry", "PeerUnmet",
    "PeerRunParams", "PeerSessionParams", "PeerResumeParams", "PeerReply",
    "PEER_RUN", "PEER_RESUME", "PEER_CLOSE",
]  # fmt: skip

PeerRole = Literal["active", "passive"]
# RFC 5040 4.3: the RDMAP opcodes 0..7, in their order (the index is the opcode).
PeerOpcode = Literal[
    "write", "read_request", "read_response", "send", "send_inv", "send_se", "send_se_inv",
    "terminate",
]  # fmt: skip
# RFC 6581 5.1: the zero-length ready-to-receive message an MPA v2 frame's flags ask for.
RtrKind = Literal["none", "send", "write", "read"]
PEER_OPCODES: tuple[PeerOpcode, ...] = get_args(PeerOpcode)
RTR_KINDS: tuple[RtrKind, ...] = get_args(RtrKind)


class _PeerEntryRequired(TypedDict):
    t_ns: int  # the host's CLOCK_MONOTONIC
    dir: Literal["tx", "rx"]
    frame: str  # mpa_request, mpa_reply, fpdu, fin, rst


class PeerEntry(_PeerEntryRequired, total=False):
    """One frame sent or received (closes have no fields nor raw)."""

    fields: dict[str, Any]  # decoded, in the shared vocabulary (docs/peer.md)
    raw: str  # hex, the first 256 bytes


class PeerUnmet(TypedDict):
    """The first expectation not met: the step's index, what it wanted, what came."""

    step: int
    expected: dict[str, Any]  # {"frame": ..., "fields": {...}}
    got: PeerEntry | None  # None: nothing came in time
    why: str


class _PeerRunRequired(TypedDict):
    role: PeerRole
    address: str  # active: the DUT's; passive: the peer's own to listen on
    port: int
    steps: list[dict[str, Any]]  # the scenario (docs/peer.md)


class PeerRunParams(_PeerRunRequired, total=False):
    src: str | None  # active: the address to connect from
    drain_s: float  # once the steps end: how long to keep recording what the DUT sends


class PeerSessionParams(TypedDict):
    session: int


class PeerResumeParams(PeerSessionParams, total=False):
    # the scenario's steps anew (as many), for the steps after the dut step it stopped at:
    # values the DUT shared there put in (a reg_mr's STag, base, length)
    steps: list[dict[str, Any]] | None


class PeerReply(TypedDict):
    session: int
    local: str  # the peer's ip:port (passive: its listener's, before the DUT connects)
    remote: str  # the DUT's, once connected ("" before)
    record: list[PeerEntry]  # the entries since the last reply
    stopped_at: int | None  # the dut step it stopped before (the session stays open)
    unmet: PeerUnmet | None
    error: str | None  # the step that could not run, and why (bad override, no connection)


PEER_RUN = Method("peer_run", PeerRunParams, PeerReply)
PEER_RESUME = Method("peer_resume", PeerResumeParams, PeerReply)
PEER_CLOSE = Method("peer_close", PeerSessionParams, PeerReply)
