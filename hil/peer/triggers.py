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

``rtr invalid`` (:class:`hil.judge.known.InvalidFrame`) is a whole frame: what a DUT that
accepted a peer-to-peer request parses as the peer's RTR (RFC 6581 5.2), the first bytes
sent after the request.  It is invalid when the peer sends anything before it has the
DUT's reply (RFC 6581 5.2: the initiator sends its RTR once the reply came), or when
those bytes, decoded as an FPDU with the request's CRC choice, have an error that is
not the stream's end: siw then drops the connection while iw_cm still waits for
ESTABLISHED, the iwcm BUG() of docs/findings/siw-p2p-bad-rtr-iwcm-bug.md.  A READ
request whose ULPDU_Length says more than its header (RFC 5040 4.4: it carries no
payload) counts too: fuzz case 767 of seed 61206 stopped the debug lab so.
"""

from __future__ import annotations

import re

from hil.agent.protocol import fpdu, mpa
from hil.agent.protocol.frames import FrameError
from hil.judge.known import FuzzTrigger, InvalidFrame, Trigger
from hil.peer.scenario import Expect, Scenario, Send

# frames.short's error, which a frame the stream ends inside of has: siw waits for the
# rest, and the peer's close then ends the connection cleanly (the finding's doc: a FIN
# in the RTR's place).
CUT_BY_END = re.compile(r": \d+ bytes, \d+ needed$")


def sets_off(scenario: Scenario, trigger: FuzzTrigger) -> str:
    """What in ``scenario``'s sends sets ``trigger`` off, said for a skip reason ("it
    sends ..."); '' when nothing does (or nothing that can be told)."""
    if isinstance(trigger, InvalidFrame):
        why = rtr_invalid(scenario)
        return f"its RTR after a peer-to-peer request is invalid: {why}" if why else ""
    value = sent_value(scenario, trigger)
    return "" if value is None else f"it sends {trigger.frame} {trigger.field} {value}"


def rtr_invalid(scenario: Scenario) -> str:
    """What is wrong with the frame a DUT that accepted the peer's peer-to-peer request
    parses as the peer's RTR; '' when it is a valid FPDU, when the peer sends no request
    in peer-to-peer mode or nothing after it, or when it cannot be told."""
    if scenario.role != "active":
        return ""
    steps = list(scenario.steps)
    sends = [(i, s) for i, s in enumerate(steps) if isinstance(s, Send)]
    first = sends[0][1] if sends else None
    if first is None or first.frame != "mpa_request" or first.truncate is not None:
        return ""
    try:
        request = mpa.decode("mpa_request", mpa.encode("mpa_request", dict(first.fields)))
    except FrameError:
        return ""
    if "error" in request or not request.get("p2p"):
        return ""
    replied = next(
        (i for i, s in enumerate(steps) if isinstance(s, Expect) and s.frame == "mpa_reply"),
        len(steps),
    )
    early = [s for i, s in sends[1:] if i < replied]
    if early:
        return f"the peer sends {early[0].frame} before it has the DUT's reply"
    return _fpdu_error([s for i, s in sends if i > replied], request)


def _fpdu_error(after: list[Send], request: dict[str, object]) -> str:
    """The error of the first FPDU in the bytes of ``after`` (the sends once the reply
    came), with CRC as the request asked; '' when there is none but the stream's end."""
    crc_on = bool(request["c"])
    stream = _stream(after, crc_on)
    if not stream:
        return ""
    got = fpdu.decode(stream, crc_on)
    errors = [e for e in str(got.get("error", "")).split("; ") if e and not CUT_BY_END.search(e)]
    if got.get("opcode") == "read_request" and got.get("payload"):
        errors.append(f"a READ request with {len(str(got['payload'])) // 2} bytes after its header")
    return "; ".join(errors)


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
    head = _stream(sends)
    return mpa.pd_length(head) if len(head) >= mpa.HEADER else None


def _stream(sends: list[Send], crc_on: bool | None = None) -> bytes:
    """The bytes ``sends`` put on the stream, each cut where it is truncated, up to the
    first send whose bytes cannot be told (see :func:`_bytes`)."""
    stream = b""
    for send in sends:
        data = _bytes(send, crc_on)
        if data is None:
            break
        stream += data if send.truncate is None else data[: send.truncate]
    return stream


def _bytes(send: Send, crc_on: bool | None = None) -> bytes | None:
    """The bytes a send puts on the stream; None for a close, a frame the peer would
    refuse to encode, or (``crc_on`` None: not known) an FPDU whose first 20 bytes
    depend on whether CRC is on.  An FPDU is taken as the first of its queue: MSN 1
    (RFC 5041 4.3), right for the first FPDU, which is all that is judged."""
    fields = dict(send.fields)
    try:
        if send.frame in mpa.KEYS:
            return mpa.encode(send.frame, fields)
        if send.frame != "fpdu":
            return None
        if crc_on is not None:
            return fpdu.encode(fields, crc_on, 1)
        with_crc, without = fpdu.encode(fields, True, 1), fpdu.encode(fields, False, 1)
    except FrameError:
        return None
    same = with_crc[: mpa.HEADER] == without[: mpa.HEADER]
    return with_crc if same else None
