"""The kernel's own evidence of a regression's window: tracepoints read from tracefs.

A bug's window is often a kernel state user space cannot see: work still queued
for an id when it is destroyed, a reject arriving while the provider's work that
made the request's upcall still runs.  The kernel shows those through its
tracepoints (CONFIG_EVENT_TRACING: the debug lab kernel, hil/lab/debug.config;
the production lab kernel has none): the workqueue's
(include/trace/events/workqueue.h, Linux 6.1: ``workqueue_queue_work``
"work struct=%p function=%ps workqueue=%s req_cpu=%d cpu=%d",
``workqueue_execute_start`` and ``workqueue_execute_end`` "work struct %p:
function %ps") and rdma_cm's (drivers/infiniband/core/cma_trace.h:
``cm_id_destroy`` and ``cm_send_rej`` "cm.id=%u src=%pISpc dst=%pISpc tos=%u",
fired by destroy_id_handler_unlock and rdma_reject; ``cm_event_handler``
"cm.id=%u src=%pISpc dst=%pISpc tos=%u %s (%lu/%d)", the event's name from
include/trace/misc/rdma.h, fired by cma_cm_event_handler before each event
reaches the consumer); and kmem's ``kfree`` (include/trace/events/kmem.h:
"call_site=%pS ptr=%p"), on only for the functions a case names (a filter on their
addresses from /proc/kallsyms: every kfree of a KASAN kernel would flood the buffer),
to tell which code freed an object.

:class:`Trace` turns those events on for a scenario on one host and reads them
back; the functions below them find a window in what was read.  Observed this
way, a window is a fact of the kernel, not a proxy of user space's timing.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from hil import tools

if TYPE_CHECKING:
    from hil.agent.agent import Agent

# Where tracefs is: its own mount point, or under debugfs (mounted on the lab's guests).
TRACEFS = ("/sys/kernel/tracing", "/sys/kernel/debug/tracing")
CALL_S = 20.0  # one tracefs read or write on a loaded debug guest
BUFFER_KB = "4096"  # per CPU: a scenario's few thousand events, with room
EVENTS = (
    "workqueue/workqueue_queue_work",
    "workqueue/workqueue_execute_start",
    "workqueue/workqueue_execute_end",
    "rdma_cma/cm_id_destroy",
    "rdma_cma/cm_send_rej",
    "rdma_cma/cm_event_handler",
)
# "  kworker/u2:1-42  [000] d..1.  123.456789: workqueue_queue_work: work struct=..."
LINE = re.compile(
    r"^\s*(?P<task>.+?)-(?P<pid>\d+)\s+\[\d+\]\s+\S+\s+(?P<t>\d+\.\d+):\s+(?P<name>\w+):\s+(?P<rest>.*)$"
)
WORK = re.compile(r"work struct[= ](?P<work>[0-9a-fx]+):?(?:.*?function[= ](?P<fn>\S+))?")
WILDCARDS = ("0.0.0.0:0", "[::]:0")  # %pISpc of an unset (listener's) destination
# The works whose runs the cases read (function names as %ps prints them, Linux 6.1):
IWCM_WORK = "cm_work_handler"  # drivers/infiniband/core/iwcm.c, on iw_cm_wq
SIW_WORK = "siw_cm_work_handler"  # drivers/infiniband/sw/siw/siw_cm.c, on siw_cm_wq
# The function whose kfree frees an iw_cm id: iwcm.c's free_cm_id, which the debug lab's
# 6.1.192 build inlines into iwcm_deref_id (`nm drivers/infiniband/core/iwcm.o` lists
# iwcm_deref_id and dealloc_work_entries, no free_cm_id), its one kfree the id's.
ID_FREER = "iwcm_deref_id"
KFREE = "kmem/kfree"
KALLSYMS = "/proc/kallsyms"
CALL_SITE = re.compile(r"call_site=(?P<fn>[\w.]+)\+0x[0-9a-f]+/0x[0-9a-f]+ ptr=(?P<ptr>\S+)")
CM_ID = re.compile(
    r"cm\.id=(?P<id>\d+) src=(?P<src>\S+) dst=(?P<dst>\S+) tos=\d+(?: (?P<event>\w+))?"
)


@dataclass(frozen=True)
class TraceEvent:
    """One tracepoint hit: when (seconds of the host's trace clock), which tracepoint,
    the worker's pid, and the fields that matter here (empty when absent)."""

    t: float
    name: str
    pid: int
    work: str = ""
    function: str = ""
    cm_id: int = -1
    dst: str = ""
    event: str = ""
    ptr: str = ""


def parse(text: str) -> list[TraceEvent]:
    """The tracepoint hits of a tracefs ``trace`` read, in order (other lines skipped)."""
    found = []
    for line in text.splitlines():
        m = LINE.match(line)
        if m is None:
            continue
        t, name, pid = float(m["t"]), m["name"], int(m["pid"])
        if (w := WORK.search(m["rest"])) is not None and name.startswith("workqueue_"):
            found.append(TraceEvent(t, name, pid, work=w["work"], function=w["fn"] or ""))
        elif name == "kfree" and (k := CALL_SITE.search(m["rest"])) is not None:
            found.append(TraceEvent(t, name, pid, function=k["fn"], ptr=k["ptr"]))
        elif (c := CM_ID.search(m["rest"])) is not None:
            found.append(
                TraceEvent(t, name, pid, cm_id=int(c["id"]), dst=c["dst"], event=c["event"] or "")
            )
    return found


def pending_at(events: list[TraceEvent], function: str, at: float) -> list[str]:
    """The works of ``function`` queued before ``at`` and not started by then (their
    ``work struct`` addresses): work still pending at that moment."""
    queued: dict[str, float] = {}
    for e in events:
        if e.t > at:
            break
        if e.function == function and e.name == "workqueue_queue_work":
            queued[e.work] = e.t
        elif e.name == "workqueue_execute_start":
            queued.pop(e.work, None)
    return sorted(queued)


def destroys_with_pending(events: list[TraceEvent], function: str) -> list[TraceEvent]:
    """The ``cm_id_destroy`` hits of connection ids (not a listener's: its destination is
    the wildcard) at which a work of ``function`` was still pending."""
    return [
        e
        for e in events
        if e.name == "cm_id_destroy"
        and not e.dst.startswith(WILDCARDS)
        and pending_at(events, function, e.t)
    ]


def runs(events: list[TraceEvent], function: str) -> int:
    """How many runs of a work of ``function`` began."""
    return sum(1 for e in events if e.name == "workqueue_execute_start" and e.function == function)


def runs_before(events: list[TraceEvent], function: str, event: str) -> int:
    """How many runs of a work of ``function`` began before the first ``cm_event_handler``
    hit whose event is ``event`` ("ESTABLISHED"); every run when none came.  Begun, not
    ended: the run whose upcall led to the event may still run when rdma_cm's own work
    (iw_cm_wq) delivers it."""
    first = next(
        (e.t for e in events if e.name == "cm_event_handler" and e.event == event), math.inf
    )
    return sum(1 for start, _, _ in spans(events, function) if start < first)


def seen(trace: Trace, hits: object) -> bool | None:
    """A window's value: None when ``trace`` could not be read on this kernel, else
    whether ``hits`` (what the case found in it) is non-empty or true."""
    return bool(hits) if trace.available else None


def spans(events: list[TraceEvent], function: str) -> list[tuple[float, float, int]]:
    """Each run of a work of ``function``: (start, end, worker pid); a run with no end
    read lasts to the trace's last event."""
    last = events[-1].t if events else 0.0
    open_: dict[tuple[str, int], float] = {}
    done: list[tuple[float, float, int]] = []
    for e in events:
        key = (e.work, e.pid)
        if e.name == "workqueue_execute_start" and e.function == function:
            open_[key] = e.t
        elif e.name == "workqueue_execute_end" and key in open_:
            done.append((open_.pop(key), e.t, e.pid))
    return done + [(t, last, pid) for (_, pid), t in open_.items()]


def frees_inside(events: list[TraceEvent], work: str, freer: str) -> list[tuple[float, float, int]]:
    """The runs of a work of ``work`` (:func:`spans`) in which ``freer`` freed memory
    (a ``kfree`` from it by the same worker): an object freed inside that work."""
    frees = [e for e in events if e.name == "kfree" and e.function == freer]
    return [
        (start, end, pid)
        for start, end, pid in spans(events, work)
        if any(start <= f.t <= end and f.pid == pid for f in frees)
    ]


def text_ranges(kallsyms: str, names: tuple[str, ...]) -> dict[str, tuple[int, int]]:
    """Each of ``names``' text address range in a /proc/kallsyms read: from its address
    to the next higher symbol's.  A name missing (inlined, or addresses hidden as 0:
    kptr_restrict) is left out."""
    addresses: list[int] = []
    starts: dict[str, int] = {}
    for line in kallsyms.splitlines():
        parts = line.split()
        if len(parts) < 3 or parts[1] not in ("t", "T"):
            continue
        address = int(parts[0], 16)
        addresses.append(address)
        if parts[2] in names and address:
            starts[parts[2]] = address
    addresses.sort()
    ranges = {}
    for name, start in starts.items():
        end = next((a for a in addresses if a > start), None)
        if end is not None:
            ranges[name] = (start, end)
    return ranges


def rejects_inside_their_upcall(events: list[TraceEvent], function: str) -> list[int]:
    """The cm ids whose reject (``cm_send_rej``) came while the run of ``function`` in
    which their CONNECT_REQUEST reached rdma_cm (``cm_event_handler``) had not ended: a
    reject racing the same endpoint's upcall, its provider's work still running."""
    runs = spans(events, function)
    raced = []
    for req in (e for e in events if e.name == "cm_event_handler" and "CONNECT_REQUEST" in e.event):
        inside = [(s, end) for s, end, _ in runs if s <= req.t <= end]
        rej = [e for e in events if e.name == "cm_send_rej" and e.cm_id == req.cm_id]
        if any(s <= r.t <= end for s, end in inside for r in rej):
            raced.append(req.cm_id)
    return raced


class Trace:
    """The tracepoints of :data:`EVENTS` on for a scenario on ``agent``'s host, then off.

    ``available`` is False on a kernel without event tracing (the production lab
    kernel): the window cannot be observed there, and the case says so.  With
    ``frees_by``, the ``kfree`` calls of those functions are traced too;
    ``frees_traced`` says whether they could be (each function found in kallsyms)."""

    def __init__(self, agent: Agent, frees_by: tuple[str, ...] = ()) -> None:
        self.agent = agent
        self.frees_by = frees_by
        self.available = False
        self.frees_traced = False
        self.root = ""
        self.text = ""

    def __enter__(self) -> Trace:
        for root in TRACEFS:
            probe = self.agent.run(tools.argv("cat", f"{root}/events/workqueue/enable"), CALL_S)
            if probe.status == 0:
                self.available, self.root = True, root
                break
        if self.available:
            self._write("buffer_size_kb", BUFFER_KB)
            self._write("trace", "")  # an empty write clears the buffer
            for e in EVENTS:
                self._write(f"events/{e}/enable", "1")
            if self.frees_by:
                self._trace_frees()
            self._write("tracing_on", "1")
        return self

    def _trace_frees(self) -> None:
        read = self.agent.run(tools.argv("cat", KALLSYMS), CALL_S, check=True)
        ranges = text_ranges(read.stdout, self.frees_by)
        if len(ranges) < len(self.frees_by):
            return
        where = " || ".join(
            f"(call_site >= {a:#x} && call_site < {b:#x})" for a, b in ranges.values()
        )
        self._write(f"events/{KFREE}/filter", where)
        self._write(f"events/{KFREE}/enable", "1")
        self.frees_traced = True

    def __exit__(self, *exc: object) -> None:
        if not self.available:
            return
        self._write("tracing_on", "0")
        read = self.agent.run(tools.argv("cat", f"{self.root}/trace"), CALL_S, check=True)
        self.text = read.stdout
        for e in EVENTS:
            self._write(f"events/{e}/enable", "0")
        if self.frees_traced:
            self._write(f"events/{KFREE}/enable", "0")
            self._write(f"events/{KFREE}/filter", "0")  # "0" clears a filter

    def events(self) -> list[TraceEvent]:
        """What was read when the trace was turned off."""
        return parse(self.text)

    def _write(self, rel: str, value: str) -> None:
        self.agent.run(tools.argv("tee", f"{self.root}/{rel}"), CALL_S, input=value, check=True)
