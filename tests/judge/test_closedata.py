"""``close-delivers``: a SEND before an orderly close missing, failed, out of order, with
a bad byte or taken after the DISCONNECTED each fail, as does a closer whose SENDs failed."""

from __future__ import annotations

from typing import Any

import pytest
from cmtimelines import Builder, connected
from contractcheck import breaks, conforms, violations

from hil.judge.profiles import SIW

RULE = "close-delivers"
LENGTHS = [1024, 768, 512, 256]


def received(**params: Any) -> Builder:
    """c1 connected; a sends 4 SENDs and closes; b's ``last_receives`` (params: each SEND
    whole, in order, polled before the DISCONNECTED read at host 5000 us; seen at 5100)."""
    t = connected()
    sent = params.pop("sent", None)  # the closer's error, if its SENDs failed
    t.act("a", "last_sends", "a:1", 190, "ok", 5, lengths=LENGTHS, error=sent)
    t.act("a", "disconnect", "a:1", 200)
    t.ev("a", "DISCONNECTED", "a:1", 202).ev("b", "DISCONNECTED", "b:2", 203)
    base: dict[str, Any] = {
        "lengths": LENGTHS,
        "completions": wcs(*LENGTHS),
        "event_us": 5000,
        "seen_us": 5100,
        "checks": [
            {"op": "send", "size": n, "ok": True, "offset": -1, "expected": -1, "got": -1}
            for n in LENGTHS
        ],
        "error": None,
    }
    result = str(params.pop("result", "ok"))
    t.act("b", "last_receives", "b:2", 185, result, 30, **{**base, **params})
    return t


def wcs(*lengths: int, status: int = 0, late: int = 0) -> list[dict[str, int]]:
    """Receive completions of these lengths, polled at host 4000 us on, the last one
    ``late`` us past the first poll after the DISCONNECTED."""
    out = [{"status": status, "byte_len": n, "poll_us": 4000 + i} for i, n in enumerate(lengths)]
    if late:
        out[-1]["poll_us"] = 5100 + late
    return out


def test_every_send_whole_in_order_and_before_the_event_passes_the_whole_contract() -> None:
    conforms(received().build(), SIW)


def test_a_completion_in_the_first_poll_after_the_event_passes() -> None:
    done = wcs(*LENGTHS)
    done[-1]["poll_us"] = 5100
    assert not violations(received(completions=done).build(), SIW, RULE)


BAD_BYTE = {"op": "send", "size": 768, "ok": False, "offset": 600, "expected": 1, "got": 2}


@pytest.mark.parametrize(
    ("params", "says"),
    [
        (
            {"completions": wcs(*LENGTHS, late=3000)},
            "connection c1, side b (lab-b) b:2: SEND 4 of 4 (256 bytes) taken from the CQ "
            "3000 us after the first poll that followed DISCONNECTED (read at host 5000 us)",
        ),
        (
            {"completions": wcs(1024, 512, 768, 256)},
            "SEND 2 of 4 (768 bytes) arrived as 512 bytes (out of order or cut)",
        ),
        (
            {"completions": wcs(*LENGTHS, status=5)},
            "SEND 1 of 4 (1024 bytes) completed with status 5",
        ),
        (
            {"completions": wcs(1024, 768), "error": "within 10s: 2 of 4 SENDs"},
            "2 of 4 SENDs before the close arrived, DISCONNECTED seen (within 10s: 2 of 4 SENDs)",
        ),
        ({"seen_us": 0}, "4 of 4 SENDs before the close arrived, DISCONNECTED not seen"),
        (
            {"checks": [BAD_BYTE]},
            "SEND of 768 bytes into side b: first bad byte at offset 600, expected 0x01",
        ),
        ({"result": "EBADF"}, "the receiving end could not drain: EBADF"),
    ],
    ids=["late", "out of order", "error", "missing", "no event", "bad byte", "not run"],
)
def test_each_broken_delivery_is_a_violation(params: dict[str, Any], says: str) -> None:
    breaks(received(**params).build(), SIW, RULE, says)


def test_a_closer_whose_sends_failed_is_a_violation() -> None:
    says = "side a (lab-a) a:1: the SENDs before the close failed: completion X"
    breaks(received(sent="completion X").build(), SIW, RULE, says)
