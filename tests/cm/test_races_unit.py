"""How race rounds are classified, how a bounded sweep stops, and when a sweep fails as
"race window not reached" (hil/cm/races/).  The sweeps run on real siw in
test_races_lab.py."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from hil.cm.races import RACES, Budget, RaceSweep, Round
from hil.cm.races.aim import aim, aim_windows, aimed_delay
from hil.cm.races.core import drive, spread
from hil.cm.races.destroy_reply import ORDERS, classify, sent_us
from hil.cm.races.hold import passive_held
from hil.cm.registry import lookup
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


def test_the_peers_established_marks_the_reply_sent_when_its_accept_returns_late() -> None:
    # siw raises the passive ESTABLISHED after sending the MPA reply, inside rdma_accept.
    d = destroy_at(10_000)  # controller 1_010_000
    slow = accept(1_000_000, us=15_000)  # returned at 1_015_000, after the destroy began
    up = Event("hb", "b", 1_003_000, 3_000, "ESTABLISHED", 0, "b:1.4")
    assert classify(d, None, slow, 500)[0] == "unclear"
    order, why = classify(d, None, slow, 500, up)
    assert order == "in_flight" and "7000 µs after the peer's ESTABLISHED was delivered" in why
    assert classify(d, None, slow, 7_000, up)[0] == "unclear"  # within the clocks
    assert sent_us(slow, up) == 1_003_000 and sent_us(accept(1_000_000, us=1_000), up) == 1_001_000
    assert sent_us(None, None) is None
    failed = Action(1_000_000, "b", "accept", "b:1.4", {}, "EINVAL", 10)
    assert sent_us(failed, None) is None  # a failed accept sent nothing


def test_a_destroy_that_never_ran_cannot_be_classified() -> None:
    never = StepRun(1, "destroy", "skipped", "a", "ha")
    with pytest.raises(InputError, match="destroy never ran"):
        classify(never, None, None, 0)


def sweep(orders: list[str]) -> RaceSweep:
    rounds = tuple(
        Round(f"r{i}", -1000 + 500 * i, 500 * i, o, "", (f"a:1.{i}", None), 10)
        for i, o in enumerate(orders)
    )
    tl = Timeline("race", "siw", ("ha", "hb"), (), ())
    race = RACES["destroy_reply"]
    return RaceSweep(race, rounds, ORDERS, 4_000, tl, "the reply's 12.0 ms")


def test_a_sweep_that_missed_an_order_says_race_window_not_reached() -> None:
    missed = sweep(["destroy_first", "unclear", "reply_first", "reply_first"])
    assert missed.counts() == {"destroy_first": 1, "in_flight": 0, "reply_first": 2, "unclear": 1}
    said = missed.not_reached()
    assert said is not None and said.startswith("race window not reached: no round in_flight")
    assert "4 rounds, offsets -1.0..+0.5 ms around the reply's 12.0 ms" in said
    assert sweep(["destroy_first", "in_flight", "reply_first"]).not_reached() is None
    assert "r1 offset -500 µs delay 500 µs: unclear" in missed.table()
    assert missed.metrics()["rounds_in_flight"] == 0 and missed.metrics()["rounds"] == 4


def test_offsets_are_spread_so_a_bounded_sweep_tries_the_whole_window_first() -> None:
    assert Budget(2_000, 1_000).offsets() == [-2_000, 2_000, 0, -1_000, 1_000]
    got = spread(list(range(9)))
    assert got[:3] == [0, 8, 4] and sorted(got) == list(range(9))
    with pytest.raises(InputError, match="step_us > 0"):
        Budget(1_000, 0)
    with pytest.raises(InputError, match="enough must be at least 1"):
        Budget(1_000, 100, enough=0)


def test_a_scaled_budget_spans_a_wider_window_in_as_many_steps() -> None:
    budget = Budget(2_000, 1_000, rounds=2, enough=1, max_rounds=6, focus_us=500)
    wide = budget.scaled(8)
    assert wide.offsets() == [o * 8 for o in budget.offsets()]
    assert (wide.focus_us, wide.rounds, wide.enough, wide.max_rounds) == (4_000, 2, 1, 6)
    assert budget.scaled(1) == budget
    with pytest.raises(InputError, match="at least 1"):
        budget.scaled(0.5)


def test_a_focus_visits_the_offsets_around_the_centre_right_after_both_ends() -> None:
    got = Budget(4_000, 500, focus_us=1_000).offsets()
    assert got[:7] == [-4_000, 4_000, 0, -500, 500, -1_000, 1_000]
    assert sorted(got) == list(range(-4_000, 4_001, 500))
    assert "+/- 1000 µs first" in Budget(4_000, 500, focus_us=1_000).describe()
    with pytest.raises(InputError, match="focus_us must be at least 0"):
        Budget(1_000, 100, focus_us=-1)


def test_the_aim_lies_inside_the_most_windows_measured() -> None:
    # Three rounds' "sent, not delivered" windows overlap in 13..14 ms; one is far off.
    assert aim([(12_000, 14_000), (13_000, 16_000), (11_000, 14_500), (30_000, 40_000)]) == 13_500
    # Windows that only touch do not overlap; empty windows (sent after delivered) count for
    # nothing, and with none at all there is no aim.
    assert aim([(1_000, 2_000), (2_000, 3_000)]) == 1_500
    assert aim([(5_000, 4_000), (6_000, 6_000)]) is None
    assert aim([]) is None
    # Rounds whose destroy came first show only the begin: as wide as the median closed one.
    assert aim([(20_000, None), (21_000, None), (10_000, 12_000)]) == 21_500
    assert aim([(20_000, None)]) == 20_500  # no closed window: OPEN_WIDTH_US
    # Before 0 no delay reaches (a connect that returned after the reply was sent, under
    # load): such a window counts only from 0, and one that ends by 0 not at all.
    assert aim([(-3_000, -800), (-2_500, -1_000), (10_000, 12_000)]) == 11_000
    assert aim([(-3_000, 1_000), (-2_000, 2_000)]) == 500
    assert aim([(-3_000, -800)]) is None


def test_the_aim_is_the_sweeps_own_once_three_of_its_rounds_closed_a_window() -> None:
    calibration = [(60_000, 62_000), (40_000, 45_000)]  # a new endpoint's first connects: slow
    two = [(20_000, 24_000), (30_000, None)]
    assert aim_windows(calibration, two) == [*calibration, *two]
    three = [*two, (21_000, 23_000), (22_000, 25_000)]
    assert aim_windows(calibration, three) == [(20_000, 24_000), (21_000, 23_000), (22_000, 25_000)]
    assert aim(aim_windows(calibration, three)) == 22_500


def test_the_windows_low_end_runs_at_delay_0_however_late_the_aim() -> None:
    budget = Budget(8_000, 500)
    assert aimed_delay(budget, 30_000, -8_000) == 0  # the first order: right after the cause
    assert aimed_delay(budget, 30_000, -7_500) == 22_500
    assert aimed_delay(budget, 5_000, -7_500) == 0  # never below 0
    assert aimed_delay(budget, 5_000, 8_000) == 13_000


def run_drive(
    budget: Budget,
    outcome: dict[int, str],
    wanted: tuple[str, ...] = ("early", "late"),
    aimed: tuple[str, ...] = (),
) -> tuple[bool, list[tuple[int, int]]]:
    """drive() over a fake race whose order depends on the offset only."""
    batches: list[tuple[int, int]] = []

    def classified() -> list[Round]:
        return [Round("r", o, o, outcome[o], "") for o, n in batches for _ in range(n)]

    early = drive(budget, wanted, lambda o, n: batches.append((o, n)), classified, aimed)
    return early, batches


def test_a_bounded_sweep_stops_once_every_wanted_order_was_reached_enough_times() -> None:
    outcome = {o: "early" if o < 0 else "late" for o in range(-4, 5)}
    early, batches = run_drive(Budget(4, 1, rounds=2, enough=2), outcome)
    assert early and batches == [(-4, 2), (4, 2)]  # both ends reached each order twice
    early, batches = run_drive(Budget(4, 1, rounds=2, enough=3), outcome)
    assert early and [o for o, _ in batches] == [-4, 4, 0, -2]


def test_a_sweep_never_runs_more_rounds_than_its_cap_nor_stops_without_every_order() -> None:
    only_early = dict.fromkeys(range(-4, 5), "early")
    early, batches = run_drive(Budget(4, 1, rounds=2, enough=1, max_rounds=5), only_early)
    assert not early and batches == [(-4, 2), (4, 2), (0, 1)]
    early, batches = run_drive(Budget(4, 1, rounds=1, enough=1), only_early)
    assert not early and len(batches) == 9  # the whole window, then not reached


# Ends: the outer orders; the aim's narrow middle order only at offset +1 (never at 0).
THREE = {
    o: "early" if o < -2 else "late" if o > 2 else "middle" if o == 1 else "miss"
    for o in range(-4, 5)
}


def test_once_only_the_aimed_order_is_missing_the_sweep_goes_round_the_focus() -> None:
    wanted = ("early", "middle", "late")
    budget = Budget(4, 1, rounds=1, enough=1, max_rounds=20, focus_us=1)
    early, batches = run_drive(budget, THREE, wanted, aimed=("middle",))
    assert early and [o for o, _ in batches] == [-4, 4, 0, -1, 1]
    # Never reached: round and round the focus (0, -1, +1), never the far offsets, up to the cap.
    never = {**THREE, 1: "miss"}
    early, batches = run_drive(budget, never, wanted, aimed=("middle",))
    assert not early and sum(n for _, n in batches) == 20
    assert [o for o, _ in batches][:8] == [-4, 4, 0, -1, 1, 0, -1, 1]
    assert {o for o, _ in batches[2:]} == {-1, 0, 1}
    # chase_rounds: bigger batches around the aim (each batch costs a fixed overhead).
    budget = Budget(4, 1, rounds=1, enough=1, max_rounds=12, focus_us=1, chase_rounds=4)
    early, batches = run_drive(budget, never, wanted, aimed=("middle",))
    assert not early and batches == [(-4, 1), (4, 1), (0, 4), (-1, 4), (1, 2)]
    assert "(4 each)" in budget.describe()
    with pytest.raises(InputError, match="chase_rounds must be 1..100"):
        Budget(4, 1, chase_rounds=0)


def test_the_focus_is_not_chased_while_an_outer_order_is_missing_nor_without_a_cap() -> None:
    wanted = ("early", "middle", "late")
    no_late = {o: "early" if o < -2 else "miss" for o in range(-4, 5)}
    early, batches = run_drive(
        Budget(4, 1, rounds=1, enough=1, max_rounds=20, focus_us=1), no_late, wanted, ("middle",)
    )
    assert not early and sorted(o for o, _ in batches) == list(range(-4, 5))  # each once
    # Without max_rounds it would never end: the spread once, as before.
    never = {**THREE, 1: "miss"}
    early, batches = run_drive(
        Budget(4, 1, rounds=1, enough=1, focus_us=1), never, wanted, ("middle",)
    )
    assert not early and len(batches) == 9
    assert Budget(4, 1, focus_us=2).focus() == [0, -1, 1, -2, 2]


def test_every_race_names_its_actions_event_and_orders() -> None:
    assert set(RACES.names()) == {
        "destroy_reply",
        "disconnects",
        "destroy_listen",
        "reject_request",
        "destroy_terminate",
    }
    for race in RACES:
        assert len(race.actions) == 2 and race.event and race.title
        assert set(race.certain) <= set(race.orders) and "unclear" not in race.orders
        assert set(race.aimed) <= set(race.orders) - set(race.certain)
    assert RACES["destroy_reply"].aimed == RACES["destroy_terminate"].aimed == ("in_flight",)


def test_a_hold_scales_with_its_budget_and_is_said_in_its_description() -> None:
    budget = Budget(2_000, 500, rounds=2, hold_us=3_000)
    slow = budget.scaled(4)
    assert (slow.hold_us, slow.window_us, slow.step_us) == (12_000, 8_000, 2_000)
    assert "the peer's frames held back 3000 µs" in budget.describe()
    assert "held back" not in Budget(2_000, 500).describe()
    with pytest.raises(InputError, match="hold_us must be at least 0, not -1"):
        Budget(2_000, 500, hold_us=-1)


def test_only_the_races_whose_middle_order_is_a_frame_on_its_way_hold_frames_back() -> None:
    held = {name for name, race in RACES.items() if race.full.hold_us}
    assert held == {"destroy_reply", "destroy_terminate"}
    sweep = lookup("race_disconnects")
    with pytest.raises(InputError, match="race disconnects holds no frames back"):
        sweep(None, hold_us=3_000)


def test_a_held_sweep_without_a_restore_journal_is_refused_before_any_change() -> None:
    sides = SimpleNamespace(journal=None)
    with (
        pytest.raises(InputError, match="changes a host's qdisc: it needs a restore journal"),
        passive_held(sides, None, Budget(1_000, 500, hold_us=3_000)),  # type: ignore[arg-type]
    ):
        pass
