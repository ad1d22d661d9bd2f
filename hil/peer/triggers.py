"""Whether a scenario sends a known kernel finding's fuzz trigger (``fuzz_trigger`` in
suites/known-kernel-findings.yaml, :class:`hil.judge.known.Trigger`).

The fuzzer does not run a case that sends one to a DUT whose kernel the finding names:
it would only stop that kernel again, and each stop costs a reboot (docs/peer-fuzz.md,
"Known crash triggers").  An MPA frame's PD_Length is read where the DUT reads it: bytes
18-19 of what the peer's sends put on the stream first (RFC 5044 7.1, Figure 11), so a
length the private data implies, a key longer or shorter than 16 bytes and a send cut
short before the next one all count.  Those bytes are rebuilt with the codec the peer
writes its frames with (:mod:`hil.agent.protocol.mpa`); a stream whose first 20 bytes
are not all MPA frames' is not judged (its case runs: a crash is still told as the known
finding afterwards).  Other fields count where a send sets them outright.
"""

from __future__ import annotations

from hil.agent.protocol import mpa
from hil.agent.protocol.frames import FrameError
from hil.judge.known import Trigger
from hil.peer.scenario import Scenario, Send


def sent_above(scenario: Scenario, trigger: Trigger) -> int | None:
    """The value above the trigger's that the scenario's sends give its field, as the DUT
    reads it; None when they give none (or none that can be told)."""
    sends = [s for s in scenario.steps if isinstance(s, Send)]
    if trigger.frame in mpa.KEYS and trigger.field == "pd_length":
        value = _pd_length_read(sends, trigger.frame)
        return value if value is not None and value > trigger.above else None
    for send in sends:
        given = dict(send.fields).get(trigger.field) if send.frame == trigger.frame else None
        if isinstance(given, int) and not isinstance(given, bool) and given > trigger.above:
            return given
    return None


def _pd_length_read(sends: list[Send], frame: str) -> int | None:
    """PD_Length as the DUT reads it from the stream, when the stream opens with ``frame``."""
    if not sends or sends[0].frame != frame:
        return None
    head = b""
    for send in sends:
        data = _mpa_bytes(send)
        if data is None:
            return None
        head += data if send.truncate is None else data[: send.truncate]
        if len(head) >= mpa.HEADER:
            return mpa.pd_length(head)
    return None


def _mpa_bytes(send: Send) -> bytes | None:
    """The bytes of an MPA frame send; None for any other frame, or one the peer would
    refuse to encode."""
    if send.frame not in mpa.KEYS:
        return None
    try:
        return mpa.encode(send.frame, dict(send.fields))
    except FrameError:
        return None
