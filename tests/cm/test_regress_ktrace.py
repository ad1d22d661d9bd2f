"""The kernel's evidence of a regression's window (hil/cm/regressions/ktrace.py).

The trace texts are made up in the format of tracefs's ``trace`` file for the
tracepoints' TP_printk formats of Linux 6.1 (include/trace/events/workqueue.h,
drivers/infiniband/core/cma_trace.h); the reads from a host go through a fake agent.
"""

from __future__ import annotations

from hil.agent.types import CommandResult
from hil.cm.regressions import ktrace
from hil.cm.regressions.ktrace import (
    ID_FREER,
    IWCM_WORK,
    SIW_WORK,
    Trace,
    destroys_with_pending,
    frees_inside,
    parse,
    pending_at,
    rejects_inside_their_upcall,
    runs,
    runs_before,
    seen,
    text_ranges,
)

HEAD = "# tracer: nop\n#\n#           TASK-PID     CPU#  |||||  TIMESTAMP  FUNCTION\n"


def line(t: float, name: str, rest: str, task: str = "kworker/0:1", pid: int = 40) -> str:
    return f"     {task}-{pid}     [000] d..1.  {t:.6f}: {name}: {rest}\n"


# Work addresses as %p prints them: hashed, 16 hex digits.
def queue(t: float, work: str, fn: str = IWCM_WORK) -> str:
    return line(
        t, "workqueue_queue_work", f"work struct={work} function={fn} workqueue=iw_cm_wq "
        "req_cpu=1 cpu=0", task="siw_rx", pid=7,
    )  # fmt: skip


def start(t: float, work: str, fn: str = IWCM_WORK, pid: int = 40) -> str:
    return line(t, "workqueue_execute_start", f"work struct {work}: function {fn}", pid=pid)


def end(t: float, work: str, fn: str = IWCM_WORK, pid: int = 40) -> str:
    return line(t, "workqueue_execute_end", f"work struct {work}: function {fn}", pid=pid)


def cm(t: float, name: str, cm_id: int, dst: str, event: str = "") -> str:
    tail = f" {event} (4/0)" if event else ""
    rest = f"cm.id={cm_id} src=192.0.2.2:7471 dst={dst} tos=0{tail}"
    return line(t, name, rest, task="agent", pid=9)


def test_the_trace_file_parses_into_its_tracepoint_hits() -> None:
    text = HEAD + queue(1.0, "000000001") + cm(1.5, "cm_id_destroy", 3, "192.0.2.1:40000")
    q, d = parse(text + "garbage line\n")
    assert (q.t, q.name, q.work, q.function, q.pid) == (
        1.0, "workqueue_queue_work", "000000001", IWCM_WORK, 7,
    )  # fmt: skip
    assert (d.name, d.cm_id, d.dst) == ("cm_id_destroy", 3, "192.0.2.1:40000")


def test_work_queued_and_not_started_is_pending() -> None:
    events = parse(
        queue(1.0, "000000000000000a")
        + queue(1.1, "000000000000000b")
        + start(1.2, "000000000000000a")
        + start(2.0, "000000000000000b")
    )
    assert pending_at(events, IWCM_WORK, 1.5) == ["000000000000000b"]
    assert pending_at(events, IWCM_WORK, 0.5) == []
    assert pending_at(events, SIW_WORK, 1.5) == []


def test_a_connection_ids_destroy_with_iwcm_work_queued_is_the_window() -> None:
    text = (
        queue(1.0, "000000000000000a")
        + cm(1.1, "cm_id_destroy", 4, "192.0.2.1:40000")  # work a still queued: the window
        + start(1.2, "000000000000000a")
        + cm(1.3, "cm_id_destroy", 5, "192.0.2.1:40001")  # nothing queued any more
        + queue(2.0, "000000000000000b")
        + cm(2.1, "cm_id_destroy", 1, "0.0.0.0:0")  # the listener's: not a connection id
    )
    assert [e.cm_id for e in destroys_with_pending(parse(text), IWCM_WORK)] == [4]


def test_a_reject_inside_the_run_that_made_its_own_upcall_is_the_window() -> None:
    text = (
        start(1.0, "00000000000000e1", SIW_WORK, pid=50)
        + cm(1.1, "cm_event_handler", 6, "192.0.2.1:40000", "CONNECT_REQUEST")
        + cm(1.2, "cm_send_rej", 6, "192.0.2.1:40000")  # siw's work still runs: raced
        + end(1.3, "00000000000000e1", SIW_WORK, pid=50)
        + start(2.0, "00000000000000e2", SIW_WORK, pid=50)
        + cm(2.1, "cm_event_handler", 7, "192.0.2.1:40001", "CONNECT_REQUEST")
        + end(2.2, "00000000000000e2", SIW_WORK, pid=50)
        + cm(2.5, "cm_send_rej", 7, "192.0.2.1:40001")  # after the run ended: no race
        + cm(2.6, "cm_send_rej", 6, "192.0.2.1:40000")
    )
    assert rejects_inside_their_upcall(parse(text), SIW_WORK) == [6]


def test_runs_count_the_starts_of_one_function() -> None:
    text = (
        start(1.0, "00000000000000e1", SIW_WORK)
        + start(1.1, "000000000000000a")
        + start(1.2, "00000000000000e2", SIW_WORK)
    )
    assert runs(parse(text), SIW_WORK) == 2


def test_runs_before_the_established_are_those_that_began_before_it() -> None:
    """The reply in two pieces (3056fc6c32e6's window): the run that read the first piece
    and the one that read the rest (still running when rdma_cm's work delivers the
    ESTABLISHED) began before it; a later run did not."""
    dst = "192.0.2.1:7174"
    text = (
        start(1.0, "00000000000000e1", SIW_WORK)
        + end(1.1, "00000000000000e1", SIW_WORK)
        + start(2.6, "00000000000000e1", SIW_WORK)
        + cm(2.7, "cm_event_handler", 4, dst, "ESTABLISHED")
        + end(2.8, "00000000000000e1", SIW_WORK)
        + start(3.0, "00000000000000e1", SIW_WORK)
        + end(3.1, "00000000000000e1", SIW_WORK)
    )
    assert runs_before(parse(text), SIW_WORK, "ESTABLISHED") == 2
    one_piece = start(2.6, "e1", SIW_WORK) + cm(2.7, "cm_event_handler", 4, dst, "ESTABLISHED")
    assert runs_before(parse(one_piece), SIW_WORK, "ESTABLISHED") == 1
    assert runs_before(parse(text), SIW_WORK, "CONNECT_ERROR") == 3  # none came: every run


def kfree(t: float, call_site: str, ptr: str, pid: int = 40) -> str:
    return line(t, "kfree", f"call_site={call_site}+0x4c/0x60 ptr={ptr}", pid=pid)


def test_a_kfree_parses_into_its_call_sites_function_and_pointer() -> None:
    (f,) = parse(HEAD + kfree(2.0, ID_FREER, "00000000c0ffee00"))
    assert (f.name, f.function, f.ptr, f.pid) == ("kfree", ID_FREER, "00000000c0ffee00", 40)


def test_an_id_freed_by_the_run_of_its_event_work_is_a_free_inside_it() -> None:
    text = (
        start(1.0, "00000000000000a1")
        + kfree(1.1, ID_FREER, "00000000c0ffee00")  # the reverted fix: freed in the work
        + end(1.2, "00000000000000a1")
        + start(2.0, "00000000000000a2")
        + end(2.1, "00000000000000a2")
        + kfree(2.2, ID_FREER, "00000000c0ffee01", pid=9)  # the destroyer's own free
        + start(3.0, "00000000000000a3", pid=41)
        + kfree(3.1, ID_FREER, "00000000c0ffee02", pid=9)  # another task, meanwhile
        + end(3.2, "00000000000000a3", pid=41)
    )
    assert frees_inside(parse(text), IWCM_WORK, ID_FREER) == [(1.0, 1.2, 40)]


KALLSYMS = """\
ffffffff81a00000 T iw_create_cm_id
ffffffff819ff000 t iwcm_deref_id
ffffffff819ff040 t dealloc_work_entries
ffffffff81000000 D some_data
"""


def test_a_functions_text_range_ends_at_the_next_symbol() -> None:
    assert text_ranges(KALLSYMS, (ID_FREER,)) == {
        ID_FREER: (0xFFFFFFFF819FF000, 0xFFFFFFFF819FF040)
    }
    assert text_ranges(KALLSYMS, ("inlined_away",)) == {}
    hidden = "0000000000000000 t iwcm_deref_id\n0000000000000000 t cm_work_handler\n"
    assert text_ranges(hidden, (ID_FREER,)) == {}  # kptr_restrict: no addresses


class FakeAgent:
    """The host side of tracefs: which files exist, what was written, the trace text."""

    def __init__(self, tracefs: str | None, trace: str = "", kallsyms: str = "") -> None:
        self.tracefs, self.trace, self.kallsyms = tracefs, trace, kallsyms
        self.writes: list[tuple[str, str | None]] = []

    def run(
        self, argv: list[str], timeout: float = 60.0, input: str | None = None, check: bool = False
    ) -> CommandResult:
        path = argv[-1]
        if path == ktrace.KALLSYMS:
            return CommandResult(tuple(argv), 0, self.kallsyms, "")
        if self.tracefs is None or not path.startswith(self.tracefs):
            return CommandResult(tuple(argv), 1, "", "No such file or directory")
        if argv[0].endswith("tee"):
            self.writes.append((path.removeprefix(self.tracefs), input))
        out = self.trace if path.endswith("/trace") else "0\n"
        return CommandResult(tuple(argv), 0, out, "")


def test_a_kernel_without_event_tracing_leaves_the_window_unobservable() -> None:
    agent = FakeAgent(None)
    with Trace(agent) as tr:  # type: ignore[arg-type]
        pass
    assert not tr.available and tr.events() == [] and agent.writes == []
    assert seen(tr, []) is None


def test_the_trace_is_turned_on_for_the_scenario_and_read_back() -> None:
    agent = FakeAgent("/sys/kernel/debug/tracing", HEAD + queue(1.0, "000000000000000a"))
    with Trace(agent) as tr:  # type: ignore[arg-type]
        assert ("/events/workqueue/workqueue_queue_work/enable", "1") in agent.writes
        assert agent.writes[-1] == ("/tracing_on", "1")
    assert tr.root == "/sys/kernel/debug/tracing"  # the debugfs mount, tried second
    assert [e.work for e in tr.events()] == ["000000000000000a"]
    assert ("/tracing_on", "0") in agent.writes
    assert all(v == "0" for p, v in agent.writes[-len(ktrace.EVENTS) :])
    assert seen(tr, []) is False and seen(tr, ["x"]) is True


def test_frees_are_traced_only_from_the_named_functions_and_the_filter_cleared_after() -> None:
    agent = FakeAgent("/sys/kernel/tracing", HEAD, kallsyms=KALLSYMS)
    with Trace(agent, frees_by=(ID_FREER,)) as tr:  # type: ignore[arg-type]
        pass
    assert tr.frees_traced
    assert (
        "/events/kmem/kfree/filter",
        "(call_site >= 0xffffffff819ff000 && call_site < 0xffffffff819ff040)",
    ) in agent.writes
    assert agent.writes[-2:] == [
        ("/events/kmem/kfree/enable", "0"),
        ("/events/kmem/kfree/filter", "0"),
    ]


def test_a_freer_missing_from_kallsyms_leaves_the_frees_untraced() -> None:
    agent = FakeAgent("/sys/kernel/tracing", HEAD, kallsyms="0 t other\n")
    with Trace(agent, frees_by=(ID_FREER,)) as tr:  # type: ignore[arg-type]
        pass
    assert tr.available and not tr.frees_traced
    assert not [w for w in agent.writes if "kfree" in w[0]]
