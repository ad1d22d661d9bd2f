"""Whether a scenario sends a known kernel finding's fuzz trigger (``fuzz_trigger`` in
suites/known-kernel-findings.yaml, :class:`hil.judge.known.Trigger`).

The fuzzer does not run a case that sends one to a DUT whose kernel the finding names:
it would only stop that kernel again, and each stop costs a reboot (docs/peer-fuzz.md,
"Known crash triggers").  An MPA frame's PD_Length is read where the DUT reads it: bytes
18-19 of what the peer's sends put on the stream first (RFC 5044 7.1, Figure 11), as
the frame the DUT waits for (a reply when it connected, a request when it listens).  So
a length the private data implies, a key longer or shorter than 16 bytes, a send cut
short before the next one and an FPDU sent before the MPA frame all count.  Those bytes
are rebuilt with the codec the peer writes its frames with (:mod:`hil.agent.protocol`);
a stream whose first 20 bytes cannot be told (a frame the peer would refuse, a CRC that
depends on the negotiation, a close) is not judged: its case runs, and a crash is still
told as the known finding afterwards.  Other fields count where a send sets them
outright.
"""

from __future__ import annotations

from hil.agent.protocol import fpdu, mpa
from hil.agent.protocol.frames import FrameError
from hil.judge.known import Trigger
from hil.peer.scenario import Scenario, Send


def sent_value(scenario: Scenario, trigger: Trigger) -> int | None:
    """The value that the scenario's sends give the trigger's field, as the DUT reads it,
    when it sets the trigger off; None when they give none (or none that can be told)."""
    sends = [s for s in scenario.steps if isinstance(s, Send)]
    if trigger.frame in mpa.KEYS and trigger.field == "pd_length":
        value = _pd_length_read(scenario, sends, trigger.frame)
        return value if value is not None and trigger.holds(value) else None
    for send in sends:
        given = dict(send.fields).get(trigger.field) if send.frame == trigger.frame else None
        if isinstance(given, int) and not isinstance(given, bool) and trigger.holds(given):
            return given
    return None


def _pd_length_read(scenario: Scenario, sends: list[Send], frame: str) -> int | None:
    """PD_Length as the DUT reads it from the stream, when it reads the stream as ``frame``."""
    if frame != ("mpa_reply" if scenario.role == "passive" else "mpa_request"):
        return None
    head = b""
    for send in sends:
        data = _bytes(send)
        if data is None:
            return None
        head += data if send.truncate is None else data[: send.truncate]
        if len(head) >= mpa.HEADER:
            return mpa.pd_length(head)
    return None


def _bytes(send: Send) -> bytes | None:
    """The bytes a send puts on the stream; None for a close, a frame the peer would
    refuse to encode, or an FPDU whose first 20 bytes depend on whether CRC is on."""
    fields = dict(send.fields)
    try:
        if send.frame in mpa.KEYS:
            return mpa.encode(send.frame, fields)
        if send.frame != "fpdu":
            return None
        # The first FPDU of its queue: MSN 1 (RFC 5041 4.3).
        with_crc, without = fpdu.encode(fields, True, 1), fpdu.encode(fields, False, 1)
    except FrameError:
        return None
    same = with_crc[: mpa.HEADER] == without[: mpa.HEADER]
    return with_crc if same else None
