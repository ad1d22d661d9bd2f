"""Events and actions: checked when made, and what they say of themselves."""

from __future__ import annotations

import pytest

from hil.judge.records import Action, Event


def test_event_rejects_bad_side_and_non_hex_private_data() -> None:
    with pytest.raises(ValueError, match="side"):
        Event("h", "c", 0, 0, "ESTABLISHED")
    with pytest.raises(ValueError):
        Event("h", "a", 0, 0, "ESTABLISHED", private_data="zz")
    assert Event("h", "a", 0, 0, "REJECTED", private_data="00ff").private_bytes == b"\x00\xff"


def test_an_action_knows_its_side_outcome_and_end() -> None:
    with pytest.raises(ValueError, match="side"):
        Action(0, "c", "connect")
    act = Action(1_000, "a", "destroy", "a:1", result="EBUSY", duration_us=2_500)
    assert (act.ok, act.end_us) == (False, 3_500)
    assert act.brief() == "a:destroy a:1 -> EBUSY @1.000ms took 2.5ms"
    assert Action(1_000, "b", "listen").end_us == 1_000  # no duration measured
