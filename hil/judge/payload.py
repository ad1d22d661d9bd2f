"""What a connection carries arrives intact: the rule ``payload-intact``.

RDMAP promises the data of every message: a Send's lands in the Data Sink's
posted buffer, an RDMA Write's at the Tagged Offset it names, an RDMA Read
Response's at the Read's sink, each byte as sent (RFC 5040 sections 5.1-5.3;
DDP places each segment of a message at its offset, RFC 5041 section 5.2),
with the MPA CRC guarding it on the wire (RFC 5044).  An RDMA Write's data
is known placed when a later Send on the same stream completes at the sink
(RFC 5040 section 5.5), which is when the sink checks it.

The ``payload`` step (:func:`hil.cm.steps.payload`) records one ``payload``
action per end, whose params hold the ``sizes`` both ends agreed (1 byte,
the MTU - 1 and + 1, the largest message), every ``checks`` entry that end
made of data from the other (``op`` send, write or read; ``size``; ``ok``;
the first bad ``offset`` with the ``expected`` and ``got`` bytes there) and
the ``error`` that stopped it.  The rule fails on a bad byte, on an end
that could not run or finish its checks, and on a check the plan named but
the end never made.  A ``received`` action that checked its message (params
``checks``: the peer SENT the pattern, hil.cm.endpoint ``received`` with ``size``)
fails on a bad byte the same way.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from hil.judge.profiles import Profiles
from hil.judge.rule import Finding, host_of, rule
from hil.judge.timeline import Action, Timeline

# The ops an end checks, in the order it checks them: as hil.agent.protocol.PAYLOAD_OPS
# (the judge imports nothing above it; tests/judge/test_payload.py holds them equal).
PAYLOAD_OPS = ("send", "write", "read")
OP_NAMES = {"send": "SEND", "write": "RDMA WRITE", "read": "RDMA READ"}


@rule(
    "payload-intact",
    None,
    "Every byte of every SEND, RDMA WRITE and RDMA READ, each way, at 1 byte, the MTU - 1 "
    "and + 1 and the largest message, arrives as sent; each end makes every check",
    "[src] RFC 5040 sections 5.1-5.3 (RDMA Write, RDMA Read and Send data placed as sent) and "
    "5.5 (an RDMA Write is placed when a later Send completes at the sink); RFC 5041 "
    "section 5.2 (each DDP segment placed at its offset)",
)
def payload_intact(tl: Timeline, profile: Profiles) -> Iterator[Finding]:
    for a in tl.actions:
        if a.name == "payload":
            yield from _findings(tl, a)
        elif a.name == "received":
            yield from _bad_bytes(tl, a)


def _findings(tl: Timeline, a: Action) -> Iterator[Finding]:
    """What is wrong with one end's ``payload`` action."""
    where = action_where(tl, a)
    if not a.ok:
        yield Finding(f"{where}: the payload check did not run: {a.result}", (), (a,))
        return
    yield from _bad_bytes(tl, a)
    error = a.params.get("error")
    if error:
        yield Finding(f"{where}: the payload check stopped: {error}", (), (a,))
        return
    made = {(c.get("op"), c.get("size")) for c in a.params.get("checks") or []}
    missing = [
        f"{OP_NAMES[op]} of {n}"
        for op in PAYLOAD_OPS
        for n in a.params.get("sizes") or []
        if (op, n) not in made
    ]
    if missing or not a.params.get("sizes"):
        what = ", ".join(missing) or "every size (none agreed)"
        yield Finding(f"{where}: never checked {what}", (), (a,))


def _bad_bytes(tl: Timeline, a: Action) -> Iterator[Finding]:
    """A finding for each of ``a``'s ``checks`` that found a bad byte."""
    for c in a.params.get("checks") or []:
        if not c.get("ok"):
            yield Finding(f"{action_where(tl, a)}: {bad_check(c, a.side)}", (), (a,))


def bad_check(c: dict[str, Any], side: str) -> str:
    """``RDMA WRITE of 1501 bytes into side b: first bad byte at offset 1500, expected
    0x3c, got 0xc3``."""
    op, size, offset = c.get("op", "?"), c.get("size", "?"), c.get("offset", -1)
    how = f"RDMA READ of {size} bytes by side {side}" if op == "read" else ""
    how = how or f"{OP_NAMES.get(op, op)} of {size} bytes into side {side}"
    expected, got = c.get("expected", -1), c.get("got", -1)
    if got < 0:
        return f"{how}: only {offset} bytes arrived"
    if expected < 0:
        return f"{how}: more bytes arrived than sent (byte {offset} is {_hex(got)})"
    return f"{how}: first bad byte at offset {offset}, expected {_hex(expected)}, got {_hex(got)}"


def _hex(byte: int) -> str:
    return f"0x{byte:02x}"


def action_where(tl: Timeline, a: Action) -> str:
    """``connection c1, side b (lab-b) b:2``."""
    label = next((e.conn for e in tl.events_for(a.id) if e.conn), None) if a.id else None
    conn = f"connection {label}" if label else "an unlabelled connection"
    return f"{conn}, side {a.side} ({host_of(tl, a.side)}) {a.id or ''}".rstrip()


RULES = (payload_intact,)
