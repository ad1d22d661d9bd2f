"""bench/cm_rate.py's round order and its summary of the per-round ratios (the bench
itself runs on the lab: its numbers are in docs/storm.md)."""

from __future__ import annotations

import math
from types import ModuleType

import pytest
from benchmod import load_bench


@pytest.fixture(scope="module")
def cm_rate() -> ModuleType:
    return load_bench("cm_rate", "cm_rate.py")


def test_hil_and_cmtime_take_turns_going_first(cm_rate: ModuleType) -> None:
    order = [cm_rate.hil_first(k) for k in range(-1, 6)]  # a warm-up round, then six
    assert order == [False, True, False, True, False, True, False]
    assert sum(order[1:]) == 3  # an even count of rounds: each first in half of them


def test_the_per_round_ratios_are_summed_up_by_median_and_geometric_mean(
    cm_rate: ModuleType,
) -> None:
    text = cm_rate.summary([2.0, 0.5, 1.0])
    assert text.split()[0] == "1.000"
    assert "geometric mean 1.000" in text and "rounds: 2.00, 0.50, 1.00" in text
    geo = math.exp((math.log(0.25) + math.log(1.0)) / 2)
    assert f"geometric mean {geo:.3f}" in cm_rate.summary([0.25, 1.0])


def test_cmtime_s_step_table_is_read_by_step_name(cm_rate: ModuleType) -> None:
    out = """step              total ms     max ms     min us  us / conn
create id    :        0.50       0.10       8.00      31.25
connect      :      125.30      40.20    3000.00    7831.25
disconnect   :       24.15       3.00     900.00    1509.38
"""
    steps = cm_rate.cmtime_steps(out)
    assert steps == {"create id": 0.5, "connect": 125.3, "disconnect": 24.15}
