"""bench/profile_measure.py: which number of a run's timeline measures each bound, the
statistics and the report (the bench itself runs on a lab: docs/profile-measure.md)."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType

import pytest
from benchmod import load_bench

from hil.judge.profile import bound_fields
from hil.judge.profiles import SIW
from hil.judge.records import Action, Event
from hil.judge.timeline import Timeline


@pytest.fixture(scope="module")
def pm() -> ModuleType:
    return load_bench("profile_measure", "profile_measure.py")


def _tl(*items: Action | Event, **metrics: float) -> Timeline:
    return Timeline(
        "t",
        "siw",
        ("h0", "h1"),
        actions=tuple(i for i in items if isinstance(i, Action)),
        events=tuple(i for i in items if isinstance(i, Event)),
        metrics=dict(metrics),
    )


def _ev(t_us: int, kind: str, cm_id: str, status: int = 0, side: str = "a") -> Event:
    return Event(
        host="h0", side=side, t_us=t_us, host_t_us=t_us, type=kind, status=status, id=cm_id
    )


def test_local_close_is_the_initiators_disconnected_after_its_disconnect(pm: ModuleType) -> None:
    tl = _tl(
        Action(1_000, "a", "disconnect", "a1"),
        _ev(4_000, "DISCONNECTED", "p1", side="b"),
        _ev(3_500, "DISCONNECTED", "a1"),
    )
    assert pm.local_close_s(tl) == pytest.approx(0.0025)
    assert pm.local_close_s(_tl(Action(1_000, "a", "disconnect", "a1"))) is None


def test_a_storms_close_is_its_slowest_first_disconnect(pm: ModuleType) -> None:
    tl = _tl(
        Action(1_000, "a", "disconnect", "a1"),
        _ev(3_000, "DISCONNECTED", "a1"),
        Action(2_000, "a", "disconnect", "a2"),
        _ev(9_000, "DISCONNECTED", "a2"),
        Action(50_000, "a", "disconnect", "a2"),  # a repeat: not a close of its own
        Action(4_000, "a", "disconnect", "a3"),  # never closed: no number
    )
    assert pm.slowest_local_close_s(tl) == pytest.approx(0.007)
    assert pm.slowest_local_close_s(_tl(Action(1_000, "a", "disconnect", "a1"))) is None


def test_a_plan_named_only_runs_only_when_named(pm: ModuleType) -> None:
    assert pm.plan_named("storm_close").named_only
    assert [p.name for p in pm.PLANS if p.named_only] == ["storm_close"]


def test_conn_sent_destroy_gives_both_its_bounds(pm: ModuleType) -> None:
    tl = _tl(
        Action(0, "a", "connect", "a1"),
        Action(200_000, "a", "destroy", "a1", duration_us=10_100_000),
        destroy_blocked_us=10_100_000,
    )
    assert pm.destroy_blocked_s(tl) == pytest.approx(10.1)
    assert pm.conn_sent_waited_s(tl) == pytest.approx(10.3)


def test_unreachable_is_the_connect_made_during_the_pull(pm: ModuleType) -> None:
    tl = _tl(
        Action(0, "a", "connect", "warm"),
        Action(100_000, "a", "pull"),
        Action(200_000, "a", "connect", None, result="ETIMEDOUT", duration_us=2_400_000),
    )
    assert pm.unreachable_s(tl) == pytest.approx(2.4)
    replied = _tl(
        Action(100_000, "a", "pull"),
        Action(200_000, "a", "connect", "c1"),
        _ev(3_200_000, "UNREACHABLE", "c1", status=-110),
    )
    assert pm.unreachable_s(replied) == pytest.approx(3.0)


def test_detection_is_the_link_pulls_metric(pm: ModuleType) -> None:
    assert pm.detection_s(_tl(detection_us=12_000_000)) == pytest.approx(12.0)
    assert pm.detection_s(_tl()) is None


def test_every_plan_measures_a_field_of_the_profile(pm: ModuleType) -> None:
    measured = {b.field for plan in pm.PLANS for b in plan.bounds}
    assert measured <= set(bound_fields())


def test_p99_of_twenty_runs_is_the_largest(pm: ModuleType) -> None:
    values = [float(v) for v in range(1, 21)]
    assert pm.percentile(values, 99) == 20.0
    assert pm.percentile(values, 50) == 10.0


def test_a_bound_row_sets_the_proposal_beside_the_profile(pm: ModuleType) -> None:
    bound = pm.PLANS[1].bounds[0]  # listener_destroy_bound_s
    row = pm.bound_row(bound, [0.002, 0.004, 0.01], 2.0, 2.5, 0.1)
    assert "runs   3" in row and "p99      10.0" in row
    assert "proposed 0.110 s  profile 2 s" in row
    assert "no run measured it" in pm.bound_row(bound, [], 2.0, 2.5, 0.1)


def test_statuses_the_profile_lacks_are_named(pm: ModuleType) -> None:
    got = pm.Samples()
    plan = pm.plan_named("local_close")
    got.add(plan, _tl(_ev(1, "DISCONNECTED", "a1"), _ev(2, "REJECTED", "a2", status=-111)))
    rows = pm.status_rows(got.statuses, SIW)
    assert rows[0].startswith("DISCONNECTED         seen [0]") and "NOT IN" not in rows[0]
    assert rows[1].endswith("NOT IN PROFILE: [-111]")


def test_bad_input_gets_a_message_not_a_traceback(
    pm: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    assert pm.main(["--only", "nope"]) == 1
    assert "no bounded sequence 'nope' (known: local_close" in capsys.readouterr().err
    assert pm.main(["--runs", "0"]) == 1
    assert "--runs must be at least 1" in capsys.readouterr().err


def test_a_bound_two_plans_measure_gets_one_row_of_all_their_runs(
    pm: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    idle, busy = pm.plan_named("admin_down"), pm.plan_named("admin_down_traffic")
    bound = idle.bounds[0]
    args = argparse.Namespace(margin=2.5, floor_ms=100.0)
    together = {"admin_down_bound_s": (bound, [0.03, 0.08, 0.22])}
    pm.report_together(together, [idle, busy], SIW, args)
    out = capsys.readouterr().out
    assert "admin_down_bound_s, all plans' runs together" in out and "runs   3" in out
    pm.report_together(together, [idle], SIW, args)
    assert capsys.readouterr().out == ""  # one plan: its own report says it all


class _FakeRun:
    """The leased pair run (the boundary): each test records its options; each
    sequence returns a close 2.5 ms long."""

    def __init__(self) -> None:
        self.options: list[object] = []
        self.result = None

    @contextmanager
    def test(self, name: str, options: object) -> Iterator[_FakeRun]:
        self.options.append(options)
        yield self

    def session(self, direction: str) -> _FakeRun:
        return self

    def run(self, sequence: str, **params: object) -> Timeline:
        return _tl(Action(1_000, "a", "disconnect", "a1"), _ev(3_500, "DISCONNECTED", "a1"))


@pytest.mark.parametrize("as_suites", [False, True])
def test_as_suites_measures_with_the_capture_and_evidence_a_suite_test_gets(
    pm: ModuleType, as_suites: bool
) -> None:
    run = _FakeRun()
    args = argparse.Namespace(
        runs=2, budget=60.0, max_failures=1, direction="a-b", as_suites=as_suites
    )
    got = pm.measure(run, pm.plan_named("local_close"), args)
    assert got.values["local_close_bound_s"] == pytest.approx([0.0025, 0.0025])
    assert [(o.wire, o.evidence) for o in run.options] == [(as_suites, as_suites)] * 2  # type: ignore[attr-defined]
