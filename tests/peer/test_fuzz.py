"""hil.peer.fuzz: cases deterministic for (seed, number), every mutation kind, the run loop."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from collections import Counter
from collections.abc import Callable, Iterator

import pytest

from hil.errors import InputError
from hil.peer.builtin import SCENARIOS
from hil.peer.fuzz import (
    KINDS,
    Finding,
    LeakScans,
    MutationKind,
    Progress,
    fuzz,
    make_case,
    mutate,
)
from hil.peer.scenario import Scenario, Send, parse, to_data

BUILT_IN = list(SCENARIOS)
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_PRINT_CASES = (
    "import json; from hil.peer.builtin import SCENARIOS; from hil.peer.fuzz import make_case;"
    "from hil.peer.scenario import to_data;"
    "print(json.dumps([to_data(make_case(list(SCENARIOS), 42, n).scenario) for n in range(30)]))"
)


def _sends(s: Scenario) -> list[Send]:
    return [step for step in s.steps if isinstance(step, Send)]


def test_a_case_is_the_same_for_the_same_seed_and_number() -> None:
    assert [make_case(BUILT_IN, 42, n) for n in range(50)] == [
        make_case(BUILT_IN, 42, n) for n in range(50)
    ]
    other = [make_case(BUILT_IN, 43, n).scenario.steps for n in range(50)]
    assert (
        sum(
            a != b
            for a, b in zip(
                other, (make_case(BUILT_IN, 42, n).scenario.steps for n in range(50)), strict=True
            )
        )
        > 40
    )


def test_a_case_is_the_same_in_another_process() -> None:
    # random.Random seeded by a string hashes it with SHA-512, never with hash(): another
    # PYTHONHASHSEED (another host, another run) makes the same cases.
    env = {**os.environ, "PYTHONHASHSEED": "12345", "PYTHONPATH": ROOT}
    out = subprocess.run(
        [sys.executable, "-c", _PRINT_CASES], env=env, capture_output=True, text=True, check=True
    ).stdout
    here = [to_data(make_case(BUILT_IN, 42, n).scenario) for n in range(30)]
    assert json.loads(out) == json.loads(json.dumps(here))


def test_every_case_is_a_valid_scenario_named_for_its_seed_and_number() -> None:
    for n in range(300):
        case = make_case(BUILT_IN, 7, n)
        assert case.scenario.name == f"{case.base}-fuzz-7-{n}"
        assert 1 <= len(case.mutations) <= 3
        assert parse(to_data(case.scenario), f"case {n}") == case.scenario


def test_every_mutation_kind_comes_up() -> None:
    seen = Counter(m.kind for n in range(300) for m in make_case(BUILT_IN, 7, n).mutations)
    assert set(seen) == set(KINDS), seen


def _applied(
    kind: MutationKind, name: str = "v2-connect-send"
) -> Iterator[tuple[Scenario, Scenario]]:
    base = SCENARIOS[name]
    for i in range(40):
        done = mutate(random.Random(i), base, kind)
        assert done is not None and done[1].kind == kind
        yield base, done[0]


@pytest.mark.parametrize("kind", ["value", "boundary", "length"])
def test_a_field_mutation_changes_one_field_of_one_send(kind: MutationKind) -> None:
    for base, mutated in _applied(kind):
        changed = [(a, b) for a, b in zip(_sends(base), _sends(mutated), strict=True) if a != b]
        assert len(changed) <= 1  # none when the value drawn was the one there
        for a, b in changed:
            assert len(set(b.fields) - set(a.fields)) == 1


def test_a_length_mutation_picks_a_length_field() -> None:
    lengths = {"pd_length", "ulpdu_length", "size", "ddp_seg_len"}
    for base, mutated in _applied("length"):
        new = {n for s in _sends(mutated) for n, _ in s.fields} - {
            n for s in _sends(base) for n, _ in s.fields
        }
        assert new <= lengths


def test_truncation_duplication_and_segmenting_change_one_send() -> None:
    for _, mutated in _applied("truncate"):
        assert sum(s.truncate is not None for s in _sends(mutated)) == 1
    for base, mutated in _applied("duplicate"):
        assert len(mutated.steps) == len(base.steps) + 1
        assert len(_sends(mutated)) == len(_sends(base)) + 1
    for _, mutated in _applied("segment"):
        assert sum(bool(s.segments) or s.coalesce_with_next for s in _sends(mutated)) == 1


def test_reordering_swaps_two_sends_of_one_connection_only() -> None:
    base = parse(
        {
            "name": "two-connections",
            "role": "active",
            "expectation": "ok",
            "steps": [
                {"step": "send", "frame": "mpa_request"},
                {"step": "send", "frame": "fpdu", "opcode": "send"},
                {"step": "send", "frame": "fin"},
                {"step": "send", "frame": "mpa_request", "rev": 1},
            ],
        },
        "test",
    )
    for i in range(30):
        done = mutate(random.Random(i), base, "reorder")
        assert done is not None
        steps = done[0].steps
        assert steps[2:] == base.steps[2:] and set(steps[:2]) == set(base.steps[:2])
        assert steps != base.steps


def test_a_kind_that_does_not_apply_gives_none() -> None:
    one_send = SCENARIOS["mpa-bad-key"]
    assert mutate(random.Random(1), one_send, "reorder") is None


def test_the_fuzzer_needs_a_scenario() -> None:
    with pytest.raises(InputError, match="at least one scenario"):
        make_case([], 1, 0)


def _bad_crc_send(s: Scenario) -> bool:
    """The boundary fake: a DUT that breaks on a SEND whose CRC is bad."""
    return any({("opcode", "send"), ("crc", "bad")} <= set(x.fields) for x in _sends(s))


def test_a_run_reports_progress_and_shrunk_findings_as_they_come() -> None:
    ticks = iter(range(1000))
    progress: list[Progress] = []
    found: list[Finding] = []
    # Three built-ins, named: a new built-in must not change these cases.
    scenarios = [SCENARIOS[n] for n in ("v2-connect-send", "send-bad-crc", "mpa-bad-key")]
    report = fuzz(
        scenarios,
        _bad_crc_send,
        seed=3,
        cases=40,
        first=100,
        on_progress=progress.append,
        on_finding=found.append,
        clock=lambda: float(next(ticks)),
    )
    assert [p.cases for p in progress] == list(range(1, 41)) and report.progress == progress[-1]
    assert report.findings == tuple(found) and found
    assert progress[-1].findings == len(found) and progress[-1].rate > 0
    assert str(progress[-1]).startswith("40/40 cases, ")
    assert [f.case.number for f in found] == sorted(f.case.number for f in found)
    for f in found:
        assert f.shrunk.reproduced and _bad_crc_send(f.case.scenario)
        assert _sends(f.shrunk.scenario) == [Send("fpdu", (("opcode", "send"), ("crc", "bad")))]


def test_no_reorder_moves_a_send_naming_the_dut_region_before_its_reg_mr() -> None:
    tagged = SCENARIOS["write-past-region-end"]
    for seed in range(40):
        applied = mutate(random.Random(seed), tagged, "reorder")
        if applied is not None:  # a valid scenario still: the loader checks the order
            parse(to_data(applied[0]), f"reorder {seed}")


class Kmemleak:
    """The DUT's kmemleak at the loop's boundary: a case that ``leaky`` names leaks an
    object when it runs (only its first ``times`` runs, when given); a scan reports what
    leaked since the last one, and clears it (hil/host/kmemleak.py's scan)."""

    def __init__(self, leaky: Callable[[Scenario], bool], times: int | None = None) -> None:
        self.leaky, self.times = leaky, times
        self.pending: list[str] = []
        self.log: list[str] = []  # "run NAME" and "scan" in order

    def unscanned(self, scenario: Scenario) -> bool:
        self.log.append(f"run {scenario.name}")
        if self.leaky(scenario) and (self.times is None or self.times > 0):
            self.times = None if self.times is None else self.times - 1
            self.pending.append(scenario.name)
        return _bad_crc_send(scenario)  # another kind of finding: never a leak

    def scan(self) -> str:
        self.log.append("scan")
        report = "".join(f"unreferenced object, from {n}\n" for n in self.pending)
        self.pending.clear()
        return report

    def fails(self, scenario: Scenario) -> bool:
        """A case with its own scan, as without batches."""
        failed = self.unscanned(scenario)
        return bool(self.scan()) or failed

    def scans(self, every: int) -> LeakScans:
        return LeakScans(every, self.unscanned, self.scan)


def _named(number: int) -> Callable[[Scenario], bool]:
    return lambda s: s.name.endswith(f"-fuzz-5-{number}")


def _batched(dut: Kmemleak, cases: int, every: int = 10) -> list[Finding]:
    found: list[Finding] = []
    scenarios = [SCENARIOS["v2-connect-send"]]
    fuzz(scenarios, dut.fails, seed=5, cases=cases, scans=dut.scans(every), on_finding=found.append)
    return found


def test_kmemleak_is_scanned_once_a_batch_and_after_the_last_case() -> None:
    dut = Kmemleak(lambda s: False)
    assert _batched(dut, 25) == []
    scans = [i for i, e in enumerate(dut.log) if e == "scan"]
    assert len(dut.log) == 25 + 3 and scans == [10, 21, 27]  # after cases 10, 20 and 25


def test_a_batch_that_leaks_is_run_again_a_case_at_a_time_to_name_the_case() -> None:
    dut = Kmemleak(_named(13))
    (finding,) = _batched(dut, 20)
    assert finding.case.number == 13 and not finding.batch
    assert finding.shrunk.reproduced  # shrunk with a scan after each try
    # Cases 10-19 ran, the scan after them leaked: each run again alone, scanned after it.
    rerun = dut.log[22 : 22 + 2 * 4]
    assert rerun == [x for n in range(10, 14) for x in (f"run v2-connect-send-fuzz-5-{n}", "scan")]


def test_a_leak_no_case_makes_alone_is_a_finding_of_the_whole_batch() -> None:
    dut = Kmemleak(_named(4), times=1)
    (finding,) = _batched(dut, 10, every=5)
    assert [c.number for c in finding.batch] == [0, 1, 2, 3, 4] and finding.case.number == 4
    assert finding.leak == "unreferenced object, from v2-connect-send-fuzz-5-4\n"
    assert not finding.shrunk.reproduced


def test_a_case_failing_otherwise_is_scanned_at_once_before_its_shrink() -> None:
    # Case 2 leaks; the first case with a bad-CRC SEND fails otherwise (never a leak).
    bad = next(n for n in range(3, 100) if _bad_crc_send(make_case(BUILT_IN, 5, n).scenario))
    dut = Kmemleak(_named(2))
    found: list[Finding] = []
    fuzz(BUILT_IN, dut.fails, seed=5, cases=bad + 1, scans=dut.scans(1000), on_finding=found.append)
    after = dut.log.index(f"run {make_case(BUILT_IN, 5, bad).scenario.name}") + 1
    assert dut.log[after] == "scan"  # the batch closed by the failing case
    assert sorted(f.case.number for f in found) == [2, bad]
    assert all(not f.batch for f in found)  # the leak named case 2, not the failing case


def test_a_case_held_back_is_counted_never_run_and_the_last_batch_still_scanned() -> None:
    dut = Kmemleak(lambda s: False)
    held = {3, 8, 9}  # the last two: the batch of cases 5-7 is scanned after the loop
    progress: list[Progress] = []
    fuzz(
        [SCENARIOS["v2-connect-send"]],
        dut.fails,
        seed=5,
        cases=10,
        scans=dut.scans(4),
        not_run=lambda c: c.number in held,
        on_progress=progress.append,
    )
    ran = [e.rsplit("-", 1)[1] for e in dut.log if e.startswith("run ")]
    assert ran == ["0", "1", "2", "4", "5", "6", "7"]
    assert dut.log[-1] == "scan" and dut.log.count("scan") == 2  # after 0-4, after 5-7
    assert (progress[-1].cases, progress[-1].not_run) == (10, 3)
    assert str(progress[-1]).endswith(", 0 findings, 3 not run (known crash triggers)")
