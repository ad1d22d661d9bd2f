"""A race's widened window and its kernel-log marker (hil/cm/regressions/widen.py).

The host goes through a fake agent: the module parameter's sysfs file (present only
on a widened kernel, bench/reverts/widen/) and the kernel log read from a cursor.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from hil.agent.types import CommandResult, KernelLog, KmsgRecord
from hil.cm.regressions.evidence import missing, unobservable
from hil.cm.regressions.widen import PARAM, Widen, opened
from hil.judge.timeline import Timeline

FIX = "53a3f7770497"
KNOB = PARAM.format(module="siw", fix=FIX)
# What the widening's pr_info logs (bench/reverts/widen/53a3f7770497.patch).
MARKER = "siw: hil widen 53a3f7770497: window open: immediate MPA request failed (-95)"


class FakeAgent:
    """A host whose kernel has ``knob`` (None: not a widened kernel) and logs ``logged``
    while the widening is on."""

    def __init__(self, knob: str | None, logged: tuple[str, ...] = (), after: int = 0) -> None:
        # ``after``: how many of ``logged`` the first read gives (the rest come on the next).
        self.knob, self.logged, self.after = knob, logged, after or len(logged)
        self.reads = 0
        self.writes: list[str | None] = []
        self.closed: list[int] = []

    def run(
        self, argv: list[str], timeout: float = 60.0, input: str | None = None, check: bool = False
    ) -> CommandResult:
        if argv[-1] != self.knob:
            return CommandResult(tuple(argv), 1, "", "No such file or directory")
        if argv[0].endswith("tee"):
            self.writes.append(input)
        return CommandResult(tuple(argv), 0, "0\n", "")

    def kmsg_cursor(self) -> int:
        return 7

    def kmsg_read(self, cursor: int) -> KernelLog:
        # What was logged since the last read, as the agent's cursor gives it.
        self.reads += 1
        now, self.logged = self.logged[: self.after], self.logged[self.after :]
        self.after = len(self.logged)
        return KernelLog(tuple(KmsgRecord(i, 0, 6, 0, m) for i, m in enumerate(now)), 0)

    def kmsg_close(self, cursor: int) -> None:
        self.closed.append(cursor)


def _timeline(seen: bool | None) -> Timeline:
    value = -1.0 if seen is None else float(seen)
    tl = Timeline("regress-siw-mpareq-failure", "siw", ("a", "b"))
    return replace(tl, metrics={"reached_setup": 1.0, "window_immediate_path": value})


def test_the_marker_is_counted_for_its_own_fix_only() -> None:
    other = "hil widen ef91271c65c1: window open: CONNECT_REQUEST delivered"
    assert opened([MARKER, "siw: unrelated", other, MARKER], FIX) == 2


def test_a_widened_kernel_is_turned_on_for_the_block_and_off_after() -> None:
    agent = FakeAgent(KNOB, (MARKER,))
    with Widen(agent, "siw", FIX, 4000) as w:  # type: ignore[arg-type]
        assert w.available and agent.writes == ["4000"]
    assert agent.writes == ["4000", "0"] and agent.closed == [7]
    assert w.opened == 1 and w.window(otherwise=False) is True


def test_a_widened_run_without_the_marker_fails_window_not_reached() -> None:
    agent = FakeAgent(KNOB, ("siw: something else",))
    with Widen(agent, "siw", FIX, 4000) as w:  # type: ignore[arg-type]
        pass
    # Whatever the tracepoints said, on a widened kernel only the marker counts.
    assert w.window(otherwise=True) is False
    gap = missing(_timeline(w.window(otherwise=True)))
    assert gap is not None and gap.startswith("window not reached")


def test_a_kernel_without_the_widening_keeps_the_cases_own_evidence() -> None:
    agent = FakeAgent(None)
    with Widen(agent, "siw", FIX, 4000) as w:  # type: ignore[arg-type]
        pass
    assert not w.available and agent.writes == [] and agent.closed == []
    assert w.window(otherwise=None) is None and w.window(otherwise=True) is True
    assert unobservable(_timeline(w.window(otherwise=None))) is not None


def test_a_widened_window_needs_the_racing_step_inside_it() -> None:
    agent = FakeAgent(KNOB, (MARKER,))
    with Widen(agent, "siw", FIX, 4000) as w:  # type: ignore[arg-type]
        pass
    # The marker alone is not the window when the case's step came outside it.
    assert w.window(otherwise=True, raced=False) is False
    assert w.window(otherwise=False, raced=True) is True


def test_without_the_widening_the_racing_step_does_not_count() -> None:
    with Widen(FakeAgent(None), "siw", FIX, 4000) as w:  # type: ignore[arg-type]
        pass
    assert w.window(otherwise=True, raced=False) is True
    assert w.window(otherwise=None, raced=True) is None


def test_a_case_waits_for_the_marker_and_it_is_counted_once() -> None:
    agent = FakeAgent(KNOB, ("siw: first", MARKER), after=1)
    with Widen(agent, "siw", FIX, 4000) as w:  # type: ignore[arg-type]
        assert w.wait_opened(5.0, poll_s=0.01)
        assert agent.reads == 2  # not in the first read: it waited for the second
    assert w.opened == 1 and w.window(otherwise=False) is True


def test_waiting_for_a_marker_never_logged_gives_up_at_its_bound() -> None:
    agent = FakeAgent(KNOB, ("siw: something else",))
    with Widen(agent, "siw", FIX, 4000) as w:  # type: ignore[arg-type]
        assert not w.wait_opened(0.05, poll_s=0.01)
    assert w.opened == 0


def test_a_kernel_without_the_widening_has_no_marker_to_wait_for() -> None:
    agent = FakeAgent(None)
    with Widen(agent, "siw", FIX, 4000) as w:  # type: ignore[arg-type]
        assert not w.wait_opened(5.0) and agent.reads == 0


def test_the_widenings_own_lines_are_kept_and_no_others() -> None:
    closed = "hil widen 53a3f7770497: window closed: the core let go of siw0's netdev"
    agent = FakeAgent(KNOB, (MARKER, "siw: unrelated", closed), after=1)
    with Widen(agent, "siw", FIX, 100) as w:  # type: ignore[arg-type]
        assert w.wait_opened(1.0, poll_s=0.0)
    assert w.said == [MARKER, closed]


def test_a_case_waits_for_a_holds_closing_line() -> None:
    closed = "hil widen 53a3f7770497: window closed: the core let go of siw0's netdev"
    agent = FakeAgent(KNOB, (MARKER, closed), after=1)
    with Widen(agent, "siw", FIX, 100) as w:  # type: ignore[arg-type]
        assert w.wait_said("window closed:", 1.0, poll_s=0.0)
        assert not w.wait_said("never logged", 0.0, poll_s=0.0)
    assert not Widen(FakeAgent(None), "siw", FIX, 100).wait_said("x", 0.0)  # type: ignore[arg-type]


class FakeJournal:
    """The restore journal (its boundary): what was journaled and forgotten, and which
    writes the knob had seen by then."""

    def __init__(self, agent: FakeAgent) -> None:
        self.agent = agent
        self.changed: list[tuple[str, dict[str, Any], list[str | None]]] = []
        self.forgotten: list[tuple[int, list[str | None]]] = []

    def change(self, host: str, undo: dict[str, Any]) -> int:
        self.changed.append((host, undo, list(self.agent.writes)))
        return 41

    def forget(self, entry: int) -> None:
        self.forgotten.append((entry, list(self.agent.writes)))


class FakeSides:
    journal: FakeJournal | None

    def __init__(self, agent: FakeAgent, journal: FakeJournal | None) -> None:
        self._agent, self.journal = agent, journal

    def agent(self, side: str) -> FakeAgent:
        return self._agent

    def host(self, side: str) -> str:
        return f"guest-{side}"


def test_the_widenings_reset_is_journaled_while_it_is_on() -> None:
    """A run killed inside the block leaves the reset to the next reservation's replay."""
    agent = FakeAgent(KNOB, (MARKER,))
    journal = FakeJournal(agent)
    with Widen.on(FakeSides(agent, journal), "b", "siw", FIX, 4000):  # type: ignore[arg-type]
        assert len(journal.changed) == 1 and journal.forgotten == []
    ((host, undo, before),) = journal.changed
    assert host == "guest-b" and before == []  # journaled before the widening was set
    assert undo["method"] == "run"
    assert undo["params"] == {"argv": ["tee", KNOB], "input": "0\n"}
    assert journal.forgotten == [(41, ["4000", "0"])]  # forgotten once it is off again


def test_no_journal_entry_on_a_kernel_without_the_widening_or_a_session_without_a_journal() -> None:
    journal = FakeJournal(FakeAgent(None))
    with Widen.on(FakeSides(FakeAgent(None), journal), "a", "siw", FIX, 4000):  # type: ignore[arg-type]
        pass
    assert journal.changed == [] and journal.forgotten == []
    agent = FakeAgent(KNOB, (MARKER,))
    with Widen.on(FakeSides(agent, None), "a", "siw", FIX, 4000):  # type: ignore[arg-type]
        pass
    assert agent.writes == ["4000", "0"]
