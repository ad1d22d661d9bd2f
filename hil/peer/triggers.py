"""Whether a scenario sends a known kernel finding's fuzz trigger (``fuzz_trigger`` in
suites/known-kernel-findings.yaml, :class:`hil.judge.known.Trigger`).

The fuzzer does not run a case that sends one to a DUT whose kernel the finding names:
it would only stop that kernel again, and each stop costs a reboot (docs/peer-fuzz.md,
"Known crash triggers").  An MPA frame's PD_Length is read where the DUT reads it: bytes
18-19 of what the peer's sends put on the stream first (RFC 5044 7.1, Figure 11), so a
length the private data implies, a key longer or shorter than 16 bytes and a send cut
short before the next one all count.  Those bytes are rebuilt here as the peer's codec
writes its frames (hil/agent/remote/peer/mpa.py, ``encode``; the controller does not
import the agent's code); a stream whose first 20 bytes are not all MPA frames' is not
judged (its case runs: a crash is still told as the known finding afterwards).  Other
fields count where a send sets them outright.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping

from hil.judge.known import Trigger
from hil.peer.scenario import Scenario, Send

KEYS = {"mpa_request": b"MPA ID Req Frame", "mpa_reply": b"MPA ID Rep Frame"}  # RFC 5044 7.1
MPA_HEADER = 20  # the key, the flags and Rev, PD_Length (RFC 5044 7.1)
V2_WORDS = 4  # IRD and ORD ahead of the private data (RFC 6581 5.1)
ENHANCED_RES = 0x10  # Linux's "enhanced connection setup" Res bit, set on Rev 2 by default


def sent_above(scenario: Scenario, trigger: Trigger) -> int | None:
    """The value above the trigger's that the scenario's sends give its field, as the DUT
    reads it; None when they give none (or none that can be told)."""
    sends = [s for s in scenario.steps if isinstance(s, Send)]
    if trigger.frame in KEYS and trigger.field == "pd_length":
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
        if len(head) >= MPA_HEADER:
            return int(struct.unpack_from("!H", head, 18)[0])
    return None


def _mpa_bytes(send: Send) -> bytes | None:
    """The bytes of an MPA frame send (IRD/ORD words as zeros: only a key shorter than 14
    bytes would put them in the header's place); None for any other frame or a field
    that cannot be read."""
    if send.frame not in KEYS:
        return None
    fields: Mapping[str, object] = dict(send.fields)
    try:
        key = bytes.fromhex(str(fields["key"])) if "key" in fields else KEYS[send.frame]
        rev = int(str(fields.get("rev", 2)))
        v2 = bool(fields.get("v2", rev == 2))
        bits = (
            int(str(fields.get("m", 0))) << 15
            | int(str(fields.get("c", 1))) << 14
            | int(str(fields.get("r", 0))) << 13
            | int(str(fields.get("res", ENHANCED_RES if v2 else 0))) << 8
            | rev
        )
        pd = b"\0" * (V2_WORDS if v2 else 0) + bytes.fromhex(str(fields.get("private_data", "")))
        length = int(str(fields.get("pd_length", len(pd))))
    except ValueError:
        return None
    return key + struct.pack("!HH", bits & 0xFFFF, length & 0xFFFF) + pd
