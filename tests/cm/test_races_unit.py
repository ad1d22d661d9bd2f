"""How a race round is classified, and when a sweep fails as "race window not reached"
(hil/cm/races.py).  The sweep itself runs on real siw in test_races_lab.py."""

from __future__ import annotations

import pytest

from hil.cm.races import ORDERS, RaceSweep, Round, classify
from hil.cm.scenario import StepRun
from hil.errors import InputError
from hil.judge.timeline import Action, Event, Timeline

OFFSET_A = 1_000_000  # controller = host a + this


def destroy_at(host_t_us: int, result: str = "ok") -> StepRun:
    return StepRun(
        1, "destroy", result, "a", "ha", id="a:2.1", t_us=host_t_us + OFFSET_A,
        host_t_us=host_t_us, us=300,
    )  # fmt: skip


def reply_at(host_t_us: int) -> Event:
    return Event("ha", "a", host_t_us + OFFSET_A, host_t_us, "ESTABLISHED", 0, "a:2.1")


def accept(t_us: int, us: int = 400) -> Action:
    return Action(t_us, "b", "accept", "b:1.4", {"auto": True}, "ok", us)


def test_a_reply_delivered_before_the_destroy_is_reply_first_on_one_clock() -> None:
    # Exact on host a, whatever the other host's clock says.
    order, why = classify(destroy_at(5_000), reply_at(4_990), accept(OFFSET_A), 4_000)
    assert order == "reply_first" and "10 µs before the destroy" in why


def test_orders_across_hosts_are_certain_only_beyond_the_clocks_uncertainty() -> None:
    d = destroy_at(10_000)  # controller 1_010_000
    assert classify(d, None, accept(1_020_001), 10_000)[0] == "destroy_first"
    assert classify(d, None, accept(1_020_000), 10_000)[0] == "unclear"
    assert classify(d, None, accept(998_000, us=1_999), 10_000)[0] == "in_flight"
    assert classify(d, None, accept(998_000, us=2_000), 10_000)[0] == "unclear"
    # A reply delivered after the destroy began does not make it reply_first.
    assert classify(d, reply_at(10_001), accept(998_000, us=1_000), 10_000)[0] == "in_flight"
    order, why = classify(d, None, None, 10_000)
    assert order == "destroy_first" and "never sent a reply" in why


def test_a_destroy_that_never_ran_cannot_be_classified() -> None:
    never = StepRun(1, "destroy", "skipped", "a", "ha")
    with pytest.raises(InputError, match="destroy never ran"):
        classify(never, None, None, 0)


def sweep(orders: list[str]) -> RaceSweep:
    rounds = tuple(
        Round(f"r{i}", -1000 + 500 * i, 500 * i, o, "", f"a:1.{i}", None, 10)  # type: ignore[arg-type]
        for i, o in enumerate(orders)
    )
    tl = Timeline("race", "siw", ("ha", "hb"), (), ())
    return RaceSweep("destroy vs CONNECT_REPLY", rounds, ORDERS, 12_000, 4_000, tl)


def test_a_sweep_that_missed_an_order_says_race_window_not_reached() -> None:
    missed = sweep(["destroy_first", "unclear", "reply_first", "reply_first"])
    assert missed.counts() == {"destroy_first": 1, "in_flight": 0, "reply_first": 2, "unclear": 1}
    said = missed.not_reached()
    assert said is not None and said.startswith("race window not reached: no round in_flight")
    assert "4 rounds, offsets -1.0..+0.5 ms around the reply's 12.0 ms" in said
    assert sweep(["destroy_first", "in_flight", "reply_first"]).not_reached() is None
    assert "r1 offset -500 µs delay 500 µs: unclear" in missed.table()
