"""hil.peer.shrink: ddmin, and a failing scenario cut to the sends and overrides that fail it."""

from __future__ import annotations

from collections.abc import Callable

from hil.peer.scenario import Dut, Expect, Scenario, Send, Step
from hil.peer.shrink import ddmin, shrink


def _has_write_with_bad_crc(s: Scenario) -> bool:
    """The boundary fake: a DUT that breaks on a WRITE whose CRC is bad, nothing else."""
    return any(
        isinstance(step, Send) and {("opcode", "write"), ("crc", "bad")} <= set(step.fields)
        for step in s.steps
    )


def _counting(fails: Callable[[Scenario], bool]) -> tuple[Callable[[Scenario], bool], list[int]]:
    calls = [0]

    def counted(s: Scenario) -> bool:
        calls[0] += 1
        return fails(s)

    return counted, calls


def _scenario(*steps: Step) -> Scenario:
    return Scenario("case", "active", "ok", steps)


NOISY = _scenario(
    Dut("listen"),
    Send("mpa_request", (("rev", 2), ("c", 1)), segments=(1, 1, 1)),
    Dut("accept"),
    Expect("mpa_reply", 5.0),
    Send("fpdu", (("opcode", "send"), ("payload", "00"))),
    Send("fpdu", (("opcode", "write"), ("stag", 7), ("crc", "bad"), ("pad", 3)), truncate=9),
    Send("fpdu", (("opcode", "send"), ("crc", "bad")), coalesce_with_next=True),
    Send("fpdu", (("opcode", "read_request"), ("size", 0))),
    Send("fin"),
)


def test_ddmin_finds_the_two_items_that_fail_together() -> None:
    assert ddmin(list(range(20)), lambda xs: {3, 17} <= set(xs)) == [3, 17]


def test_ddmin_finds_one_item_and_none_when_nothing_is_needed() -> None:
    assert ddmin(list(range(9)), lambda xs: 5 in xs) == [5]
    assert ddmin(list(range(9)), lambda xs: True) == []


def test_shrinking_keeps_the_one_send_and_the_two_overrides_that_fail() -> None:
    fails, calls = _counting(_has_write_with_bad_crc)
    shrunk = shrink(NOISY, fails)
    assert shrunk.reproduced and shrunk.runs == calls[0]
    assert shrunk.scenario.steps == (
        Dut("listen"),
        Dut("accept"),
        Expect("mpa_reply", 5.0),
        Send("fpdu", (("opcode", "write"), ("crc", "bad"))),
    )


def test_shrinking_keeps_what_two_sends_need_together() -> None:
    def fails(s: Scenario) -> bool:
        sends = [step for step in s.steps if isinstance(step, Send)]
        segmented = [i for i, x in enumerate(sends) if x.segments]
        return bool(segmented) and _has_write_with_bad_crc(_scenario(*sends[segmented[0] :]))

    sends = [s for s in shrink(NOISY, fails).scenario.steps if isinstance(s, Send)]
    assert sends == [
        Send("mpa_request", (), segments=(1, 1, 1)),
        Send("fpdu", (("opcode", "write"), ("crc", "bad"))),
    ]


def test_a_case_that_does_not_fail_again_is_kept_whole_and_said_so() -> None:
    shrunk = shrink(NOISY, lambda s: False)
    assert not shrunk.reproduced and shrunk.scenario == NOISY and shrunk.runs == 1
