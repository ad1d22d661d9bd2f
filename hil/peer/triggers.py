"""Whether a scenario sends a known kernel finding's fuzz trigger (``fuzz_trigger`` in
suites/known-kernel-findings.yaml, :class:`hil.judge.known.Trigger`).

The fuzzer does not run a case that sends one to a DUT whose kernel the finding names:
it would only stop that kernel again, and each stop costs a reboot (docs/peer-fuzz.md,
"Known crash triggers").  A field is read as the frame goes on the wire: an MPA frame's
PD_Length that its private data implies counts as much as one set outright, and a
send truncated before the MPA header's end sends no value.
"""

from __future__ import annotations

from collections.abc import Mapping

from hil.judge.known import Trigger
from hil.peer.scenario import Scenario, Send

MPA_FRAMES = ("mpa_request", "mpa_reply")
MPA_HEADER = 20  # the key, the flags and Rev, PD_Length (RFC 5044 7.1)
V2_WORDS = 4  # IRD and ORD ahead of the private data (RFC 6581 5.1)


def sent_above(scenario: Scenario, trigger: Trigger) -> int | None:
    """The first value above the trigger's that a send of its frame gives its field;
    None when no send does."""
    for step in scenario.steps:
        if isinstance(step, Send) and step.frame == trigger.frame:
            value = _value(step, trigger.field)
            if value is not None and value > trigger.above:
                return value
    return None


def _value(send: Send, field: str) -> int | None:
    fields = dict(send.fields)
    if send.frame in MPA_FRAMES and send.truncate is not None and send.truncate < MPA_HEADER:
        return None  # the header's fields never all go out
    value = fields.get(field)
    if value is None and send.frame in MPA_FRAMES and field == "pd_length":
        value = _pd_length(fields)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _pd_length(fields: Mapping[str, object]) -> int | None:
    """PD_Length as the peer's codec writes it when no override names it: the private
    data's bytes, and the IRD/ORD words of Rev 2 (hil/agent/remote/peer/mpa.py, encode)."""
    data = fields.get("private_data", "")
    rev = fields.get("rev", 2)
    if not isinstance(data, str) or len(data) % 2:
        return None
    return len(data) // 2 + (V2_WORDS if fields.get("v2", rev == 2) else 0)
