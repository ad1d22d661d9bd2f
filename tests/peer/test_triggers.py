"""hil.peer.triggers: a known crash's fuzz trigger found in a scenario's sends."""

from __future__ import annotations

from dataclasses import replace

from hil.judge.known import InvalidFrame, Trigger
from hil.peer.builtin import SCENARIOS
from hil.peer.scenario import Scenario, Send, Step
from hil.peer.triggers import rtr_invalid, sent_value, sets_off

PDLEN = Trigger("mpa_reply", "pd_length", 256)


def _reply(**fields: int | str) -> Send:
    return Send("mpa_reply", tuple(fields.items()))


def _with(send: Send) -> Scenario:
    """The DUT connects (neg-dut-ird-ord-0), the peer's reply being ``send``."""
    base = SCENARIOS["neg-dut-ird-ord-0"]
    steps = tuple(send if isinstance(s, Send) and s.frame == "mpa_reply" else s for s in base.steps)
    return replace(base, steps=steps)


def test_a_pd_length_set_above_the_trigger_is_found() -> None:
    assert sent_value(SCENARIOS["mpa-reply-pd-too-long"], PDLEN) == 513
    assert sent_value(_with(_reply(rev=2, pd_length=600)), PDLEN) == 600


def test_a_pd_length_the_private_data_implies_counts_too() -> None:
    assert sent_value(_with(_reply(rev=2, private_data="00" * 300)), PDLEN) == 304  # + IRD/ORD


def test_the_built_in_replies_send_no_trigger_and_a_cut_header_reads_on() -> None:
    assert sent_value(SCENARIOS["neg-dut-ird-ord-0"], PDLEN) is None
    assert sent_value(SCENARIOS["v2-connect-send"], PDLEN) is None  # the DUT replies, not the peer
    truncated = replace(_reply(rev=2, pd_length=600), truncate=19)
    # Cut one byte short: the SEND after it gives byte 19, its ULPDU_Length's high byte.
    assert sent_value(_with(truncated), PDLEN) == 0x0200
    assert sent_value(_with(replace(truncated, truncate=18)), PDLEN) is None  # ULPDU_Length
    assert sent_value(_with(replace(truncated, truncate=20)), PDLEN) == 600


def test_pd_length_is_read_where_the_dut_reads_it_on_the_stream() -> None:
    # Fuzz case 107 of seed 61206 (debug lab, 2026-12-06): a 26-byte key, so bytes 18-19
    # are the key's (0x7b8b), and siw crashed on it.
    long_key = _reply(ird=256, ord=256, key="a96c20a87c6a264226e64068942a92b821167b8b0f357379a506")
    assert sent_value(_with(long_key), PDLEN) == 0x7B8B
    # A reply cut at 10 bytes, then a whole one: header bytes 18-19 are the second's 8-9,
    # "ep" of "MPA ID Rep Frame".
    cut = replace(_reply(rev=2), truncate=10)
    base = SCENARIOS["neg-dut-ird-ord-0"]
    steps: list[Step] = []
    for step in base.steps:
        steps += (
            [cut, _reply(rev=2)] if isinstance(step, Send) and step.frame == "mpa_reply" else [step]
        )
    assert sent_value(replace(base, steps=tuple(steps)), PDLEN) == int.from_bytes(b"ep", "big")


def _fpdu_first(fpdu: Send) -> Scenario:
    """neg-dut-ird-ord-0 with ``fpdu`` sent before the peer's reply."""
    base = SCENARIOS["neg-dut-ird-ord-0"]
    steps: list[Step] = []
    for step in base.steps:
        first = isinstance(step, Send) and step.frame == "mpa_reply"
        steps += [fpdu, step] if first else [step]
    return replace(base, steps=tuple(steps))


def test_an_fpdu_before_the_reply_is_read_as_the_reply_s_header() -> None:
    # Fuzz case 508 of seed 61206 (debug lab, 2026-12-06): a SEND before the reply; its
    # untagged DDP header fills bytes 2-19, so PD_Length is MO's low half (RFC 5041 4.4).
    send = Send("fpdu", (("opcode", "send"), ("payload", "68696c"), ("mo", 0xFFFFFFFF)))
    assert sent_value(_fpdu_first(send), PDLEN) == 0xFFFF
    assert sent_value(_fpdu_first(replace(send, fields=(("opcode", "send"),))), PDLEN) is None
    # A tagged WRITE with no payload is 18 bytes before its CRC: bytes 18-19 are the CRC's,
    # which depends on the negotiation, so the head is not judged.
    empty_write = Send("fpdu", (("opcode", "write"), ("stag", 0xFFFF), ("to", 0xFFFF)))
    assert sent_value(_fpdu_first(empty_write), PDLEN) is None


def test_the_dut_reads_a_request_when_it_listens() -> None:
    # v2-connect-send: the peer connects, so the DUT reads its stream as a request and a
    # reply's trigger never applies, whatever the bytes.
    base = SCENARIOS["v2-connect-send"]
    steps = tuple(
        Send("mpa_request", (("pd_length", 600),))
        if isinstance(s, Send) and s.frame == "mpa_request"
        else s
        for s in base.steps
    )
    assert sent_value(replace(base, steps=steps), PDLEN) is None
    assert sent_value(replace(base, steps=steps), Trigger("mpa_request", "pd_length", 256)) == 600


def test_a_trigger_s_range_holds_only_inside_it() -> None:
    # Fuzz case 510 of seed 61206 (debug lab, 2026-12-06): an enhanced reply with
    # PD_Length 1, siw-mpa-reply-pd-short-oob's trigger.
    short = Trigger("mpa_reply", "pd_length", 0, 3)
    assert sent_value(_with(_reply(ord=16383, ird=8000, pd_length=1)), short) == 1
    assert sent_value(_with(_reply(pd_length=4)), short) is None
    assert sent_value(SCENARIOS["neg-dut-ird-ord-0"], short) is None  # PD_Length 4


def _rtr_case(rtr: Send, *, request_twice: bool = False, early: bool = False) -> Scenario:
    """neg-p2p-read with ``rtr`` as its RTR; the request sent twice, or the RTR sent
    before the DUT's reply (the shapes of fuzz cases 526, 772, 784 and 605 of seed 61206)."""
    base = SCENARIOS["neg-p2p-read"]
    steps: list[Step] = []
    for step in base.steps:
        if isinstance(step, Send) and step.frame == "mpa_request":
            steps += [step, step] if request_twice else [step]
            steps += [rtr] if early else []
        elif isinstance(step, Send) and _opcode(step) == "read_request":
            steps += [] if early else [rtr]
        else:
            steps.append(step)
    return replace(base, steps=tuple(steps))


def _opcode(step: Send) -> object:
    return dict(step.fields).get("opcode")


READ_RTR = Send("fpdu", (("opcode", "read_request"), ("size", 0)))


def test_the_built_in_rtrs_are_valid_and_the_bad_rtr_scenario_is_not() -> None:
    for rtr in ("send", "write", "read"):
        assert rtr_invalid(SCENARIOS[f"neg-p2p-{rtr}"]) == ""
        assert rtr_invalid(SCENARIOS[f"neg-dut-p2p-{rtr}"]) == ""  # the DUT connects
    assert "RDMAP version 0" in rtr_invalid(SCENARIOS["neg-p2p-bad-rtr"])  # a 2nd request
    assert rtr_invalid(SCENARIOS["neg-ird-ord-0"]) == ""  # no peer-to-peer mode


def test_an_rtr_siw_refuses_is_invalid_and_one_cut_by_the_stream_end_is_not() -> None:
    assert rtr_invalid(_rtr_case(READ_RTR)) == ""
    # Case 767: ULPDU_Length 65534 on the READ request: siw parsed the SEND after it too.
    long = Send("fpdu", (*READ_RTR.fields, ("ulpdu_length", 65534)))
    assert "bytes after its header" in rtr_invalid(_rtr_case(long))
    assert "CRC does not match" in rtr_invalid(
        _rtr_case(Send("fpdu", (*READ_RTR.fields, ("crc", "bad"))))
    )
    # The RTR alone, cut short: siw waits for its rest and sees the close (a FIN in the
    # RTR's place closed cleanly: docs/findings/siw-p2p-bad-rtr-iwcm-bug.md).
    base = SCENARIOS["neg-p2p-read"]
    cut = tuple(
        replace(s, truncate=10) if isinstance(s, Send) and s.frame == "fpdu" else s
        for s in base.steps
        if not (isinstance(s, Send) and _opcode(s) == "send")
    )
    assert rtr_invalid(replace(base, steps=cut)) == ""


def test_anything_sent_before_the_reply_sets_the_rtr_trigger_off() -> None:
    twice = _rtr_case(READ_RTR, request_twice=True)
    assert rtr_invalid(twice) == "the peer sends mpa_request before it has the DUT's reply"
    assert rtr_invalid(_rtr_case(READ_RTR, early=True)).startswith("the peer sends fpdu before")
    said = sets_off(twice, InvalidFrame("rtr"))
    assert said.startswith("its RTR after a peer-to-peer request is invalid: the peer sends")
    assert sets_off(SCENARIOS["mpa-reply-pd-too-long"], PDLEN) == "it sends mpa_reply pd_length 513"
    assert sets_off(SCENARIOS["neg-p2p-read"], InvalidFrame("rtr")) == ""
