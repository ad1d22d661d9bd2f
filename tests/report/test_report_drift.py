"""The drift comparison on hand-made nights: each kind's rule, the thresholds, the lines."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from hil.errors import InputError
from hil.report import drift
from hil.report.drift_kinds import KINDS, MARGIN_LIMITS, Limits, Value

STACK = {"lab-a.kernel": "6.1.0", "lab-a.data0.firmware": "1.0"}
KEY = "suites/test_close.py::test_x reject a REJECTED"


def night(run: int, values: Mapping[str, Mapping[str, Value]], **stack: str) -> drift.NightRecord:
    return drift.NightRecord(run, f"2026-12-0{run}T02:00:00Z", "vpair", values, {**STACK, **stack})


def compare(now: drift.NightRecord, *before: drift.NightRecord, **specs: str) -> drift.Drift:
    return drift.compare(now, before, drift.limits_of([f"{k}={v}" for k, v in specs.items()]))


def test_every_kind_has_its_defaults_and_their_reason() -> None:
    assert KINDS.names() == ("wire", "status", "bound", "detection", "storm")
    assert all(k.why and k.what for k in KINDS)
    assert drift.default_limits()["bound"] == MARGIN_LIMITS == Limits(1.5, 2.5, 100_000)


def test_no_history_yet_is_no_change() -> None:
    found = compare(night(1, {"status": {KEY: "-104"}}))
    assert found == drift.Drift("vpair", 0)
    assert drift.summary_lines(found) == [
        "drift: vpair: no history yet (tonight is its first night)"
    ]


def test_a_status_no_night_before_had_fails_beside_the_firmware_that_changed() -> None:
    before = [night(1, {"status": {KEY: "-104"}}), night(2, {"status": {KEY: "-104"}})]
    now = night(3, {"status": {KEY: "-111"}}, **{"lab-a.data0.firmware": "1.1"})
    found = compare(now, *before)
    assert found.fails
    assert found.changes == (
        drift.Change("status", KEY, "-104", "-111", "no night of 2 before had it", True),
    )
    assert found.stack == (drift.StackChange("lab-a.data0.firmware", "1.0", "1.1"),)
    assert drift.summary_lines(found) == [
        "drift: vpair: 1 changed against the 2 nights before, 1 past a fail threshold",
        f"  FAILS status: {KEY}: -104 -> -111 (no night of 2 before had it)",
        "  on the pair since the night before:",
        "    lab-a.data0.firmware: 1.0 -> 1.1",
    ]


def test_a_value_seen_in_the_window_is_no_change() -> None:
    # A race sweep's statuses depend on which order happened: a value of the window is known.
    before = [night(1, {"status": {KEY: "-104"}}), night(2, {"status": {KEY: "-104,0"}})]
    assert compare(night(3, {"status": {KEY: "-104"}}), *before).changes == ()


def test_a_categorical_kind_set_to_flag_only_does_not_fail() -> None:
    before = night(1, {"wire": {"t tcp flags": "ACK,FIN,SYN"}})
    found = compare(night(2, {"wire": {"t tcp flags": "ACK,RST,SYN"}}), before, wire="flag")
    assert not found.fails and found.changes[0].line() == (
        "flagged wire: t tcp flags: ACK,FIN,SYN -> ACK,RST,SYN (no night of 1 before had it)"
    )


def test_new_and_missing_keys_are_not_changes() -> None:
    before = night(1, {"status": {"gone": "0"}})
    assert compare(night(2, {"status": {"new": "-110"}}), before).changes == ()


@pytest.mark.parametrize(
    ("past", "now", "flagged", "fails"),
    [
        ([1000.0, 1100.0, 1200.0], 1600.0, False, False),  # x1.45 the median 1100
        ([1000.0, 1100.0, 1200.0], 1700.0, True, False),  # x1.55: shown
        ([100_000.0], 260_000.0, True, True),  # x2.6 and 160 ms: past the margin rule
        ([10_000.0], 30_000.0, True, False),  # x3, but 20 ms: under the 100 ms floor
        ([300_000.0], 100_000.0, True, True),  # x1/3: a timer that got shorter
        ([0.0], 0.0, False, False),
    ],
)
def test_a_bound_p99_against_the_median_of_the_nights_before(
    past: list[float], now: float, flagged: bool, fails: bool
) -> None:
    key = "connect_us{scenario=close}"
    before = [night(i, {"bound": {key: v}}) for i, v in enumerate(past, 1)]
    found = compare(night(9, {"bound": {key: now}}), *before)
    assert bool(found.changes) == flagged and found.fails == fails


def test_numeric_thresholds_are_configurable_and_never_fails() -> None:
    key = "storm_rate_per_s{n=64}"
    before = night(1, {"storm": {key: 100.0}})
    assert not compare(night(2, {"storm": {key: 20.0}}), before).fails  # x0.2: under 8x
    assert compare(night(2, {"storm": {key: 20.0}}), before, storm="1.5:4").fails
    assert not compare(night(2, {"storm": {key: 1.0}}), before, storm="1.5:never").fails
    changes = compare(night(2, {"storm": {key: 130.0}}), before, storm="1.2:4").changes
    assert changes[0].line() == (f"flagged storm: {key}: 100 -> 130 (x1.3 the median of 1 nights)")


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("latency=1.5:2", "no drift metric kind 'latency' (known: bound, detection, status,"),
        ("bound", "not KIND=VALUE"),
        ("bound=2", "bound takes FLAG:FAIL"),
        ("bound=0.5:2", "'0.5' is not a factor of 1 or more"),
        ("storm=1.5:x", "'x' is not a factor of 1 or more"),
        ("status=2", "status takes fail or flag"),
    ],
)
def test_bad_thresholds_say_what_is_wrong(spec: str, message: str) -> None:
    with pytest.raises(InputError, match=message.replace("(", r"\(")):
        drift.limits_of([spec])


def test_the_overview_lines() -> None:
    before = night(1, {"status": {KEY: "-104"}})
    found = compare(night(2, {"status": {KEY: "-111"}}), before)
    assert drift.properties(found) == {
        "drift": "vpair: 1 changed against the night before, 1 past a fail threshold",
        "drift.01": f"FAILS status: {KEY}: -104 -> -111 (no night of 1 before had it)",
        "drift.stack": "nothing changed",
    }
    steady = compare(night(2, {"status": {KEY: "-104"}}), before)
    assert drift.properties(steady) == {
        "drift": "vpair: 0 changed against the night before, 0 past a fail threshold"
    }


def test_a_record_reads_back_and_a_bad_one_is_named() -> None:
    rec = night(1, {"bound": {"connect_us": 1.5}, "status": {KEY: "0"}})
    assert drift.NightRecord.from_json(rec.to_json(), "x") == rec
    with pytest.raises(InputError, match=r"^f\.json: not a drift record \(KeyError"):
        drift.NightRecord.from_json('{"run": 1}', "f.json")
