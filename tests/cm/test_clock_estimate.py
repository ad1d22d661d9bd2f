"""Clock estimates from synthetic samples, and a pair's clocks over the fake agent boundary.

The real thing: tests/agent/test_clockpeer.py (two agents on this machine)
and tests/cm/test_clock_lab.py (the virtual lab's two guests).
"""

from __future__ import annotations

import random

import pytest
from fake_cm import SKEW_US, FakeCMWorld

from hil.cm import clock
from hil.cm.session import CMSession
from hil.errors import InputError, RemoteError
from hil.judge.profiles import SIW
from hil.judge.timeline import ClockOffset, RelativeClock, Timeline


def _probes(true_a_minus_b: int, rounds: int, seed: int = 1) -> list[list[int]]:
    """Probes A sent and B echoed: random one-way delays (50 µs .. 5 ms) and turnarounds."""
    rng = random.Random(seed)
    out = []
    t = 1_000_000
    for _ in range(rounds):
        there, back, turn = rng.randint(50, 5000), rng.randint(50, 5000), rng.randint(5, 300)
        t1 = t
        t2 = t1 + there - true_a_minus_b  # B's clock reads A's minus the offset
        t3 = t2 + turn
        t4 = t3 + back + true_a_minus_b
        out.append([t1, t2, t3, t4])
        t += 10_000
    return out


def test_relative_clock_contains_the_truth_and_tightens_with_samples() -> None:
    truth = 3_456_789  # A's clock is this far ahead of B's
    few = clock.relative("a", "b", _probes(truth, 3))
    many = clock.relative("a", "b", _probes(truth, 300))
    for rc in (few, many):
        assert (rc.host_a, rc.host_b) == ("a", "b")
        assert abs(rc.offset_us - truth) <= rc.uncertainty_us
    assert many.uncertainty_us < few.uncertainty_us
    # The intersection is never wider than the tightest single probe's half round trip.
    best = min((t4 - t1) - (t3 - t2) for t1, t2, t3, t4 in _probes(truth, 300))
    assert many.uncertainty_us <= -(-best // 2)


def test_a_probe_whose_stamps_run_backwards_is_refused() -> None:
    with pytest.raises(InputError, match=r"stamps out of order: \[10, 5, 4, 20\]"):
        clock.relative("a", "b", [[10, 5, 4, 20]])
    with pytest.raises(InputError, match="no samples"):
        clock.relative("a", "b", [])


def test_windows_that_miss_each_other_widen_the_uncertainty_over_the_gap() -> None:
    # Two windows 10 µs apart (clocks drifting during the measurement): the midpoint,
    # and an uncertainty that covers both.
    b = clock.intersect([(0, 100), (110, 200)])
    assert (b.low, b.high, b.middle, b.half_width) == (110, 100, 105, 5)


def test_ssh_offset_intersects_every_round_trip(monkeypatch: pytest.MonkeyPatch) -> None:
    # Controller stamps t0, t1 around a host reading h; the truth is controller = h + 400.
    # The windows [0, 800], [350, 450] and [390, 1000] intersect in [390, 450].
    rounds = [(0, 800, 0), (1000, 1100, 650), (2000, 2610, 1610)]
    ticks = iter([t for t0, t1, _ in rounds for t in (t0, t1)])
    hosts = iter([h for _, _, h in rounds])
    monkeypatch.setattr(clock, "controller_us", lambda: next(ticks))
    assert clock.estimate("h", lambda: next(hosts), rounds=3) == ClockOffset("h", 420, 30)


def test_through_derives_bs_offset_and_adds_the_uncertainties() -> None:
    a = ClockOffset("a", 1000, 2500)
    rc = RelativeClock("a", "b", -70, 40)
    b = clock.through(a, rc)
    assert b == ClockOffset("b", 930, 2540)
    assert rc.agrees(a, b) and not rc.agrees(a, ClockOffset("b", 2000, 10))
    with pytest.raises(InputError, match="c is not a"):
        clock.through(ClockOffset("c", 0, 1), rc)


def _timeline(clocks: tuple[RelativeClock, ...], b_offset: int) -> Timeline:
    offsets = (ClockOffset("a", 1000, 2500), ClockOffset("b", b_offset, 2540))
    return Timeline("t", "siw", ("a", "b"), offsets=offsets, clocks=clocks)


def test_timeline_compares_two_hosts_by_their_relative_clock_when_it_agrees() -> None:
    rc = RelativeClock("a", "b", -70, 40)
    tl = _timeline((rc,), 930)
    assert tl.uncertainty_us("a", "b") == tl.uncertainty_us("b", "a") == 40
    assert tl.uncertainty_us("a") == 2500 and tl.uncertainty_us("a", "a") == 2500
    # Offsets measured apart (the relative clock not used to place B): the sum.
    assert _timeline((rc,), 5000).uncertainty_us("a", "b") == 5040
    assert _timeline((), 930).uncertainty_us("a", "b") == 5040
    assert Timeline.from_json(tl.to_json()) == tl
    assert Timeline.from_json(tl.sorted().to_json()).clocks == (rc,)


def _session(world: FakeCMWorld) -> CMSession:
    return CMSession(world, world.pair, profile=SIW)  # type: ignore[arg-type]


def test_a_pair_places_b_through_the_probes_and_its_timelines_carry_that_clock(
    world: FakeCMWorld,
) -> None:
    s = _session(world)
    a, b = s.offset("a"), s.offset("b")
    (rc,) = s.clocks()
    # The fake's probes: 40 µs one way, 10 µs turnaround, stamped from one reading:
    # each window is +/- 40 µs around the skew, and so is their intersection.
    assert (rc.host_a, rc.host_b) == ("h0", "h1") and rc.uncertainty_us == 40
    assert rc.offset_us == SKEW_US["h0"] - SKEW_US["h1"]
    assert b == clock.through(a, rc)
    assert world.agents["h0"].calls.count("clock_probe") == 1
    tl = s.run("connect")
    assert tl.clocks == s.clocks() and tl.uncertainty_us("h0", "h1") <= 40


def test_a_pair_whose_probes_fail_measures_b_over_ssh_and_says_so(
    world: FakeCMWorld, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def no_answer(*args: object, **kwargs: object) -> list[list[int]]:
        raise RemoteError("h0", "clock probes to h1 (198.18.0.2 UDP 20001): none of 9 answered")

    monkeypatch.setattr(clock, "probe_samples", no_answer)
    s = _session(world)
    b = s.offset("b")
    assert s.clocks() == ()
    assert abs(b.offset_us + SKEW_US["h1"]) <= b.uncertainty_us + 1000
    assert "host-to-host clock of pair l01 unavailable: h0: clock probes to h1" in caplog.text
    tl = s.run("connect")
    assert tl.clocks == () and tl.uncertainty_us("h0", "h1") == sum(
        o.uncertainty_us for o in tl.offsets
    )


@pytest.fixture
def world() -> FakeCMWorld:
    return FakeCMWorld()


def test_more_probes_get_proportionally_more_time_and_few_get_the_default() -> None:
    assert clock.probe_budget_s(5) == clock.probe_budget_s(clock.DEFAULT_PROBES)
    assert clock.probe_budget_s(4 * clock.DEFAULT_PROBES) == 4 * clock.PROBE_BUDGET_S
