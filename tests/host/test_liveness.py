"""The liveness watch (hil.host.liveness) against stand-in hosts at the agent and SSH boundary.

The real agent, kernel log and guests are in test_liveness_lab.py (a line in
a guest's real kernel log; a guest frozen through QMP) and in
tests/plugin/test_crash_lab.py (a guest killed, frozen and panicked under a
pytest session).
"""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace
from typing import Any

import pytest

from hil.errors import AgentError, SSHError
from hil.host.liveness import KEEP, Crash, Watch, crash_line

BOUND = 1.0


class StandIn:
    """One host: its agent's kernel-log calls and its SSH ``true``; each can be made to
    fail at once or to hang (a frozen host)."""

    def __init__(self, name: str) -> None:
        self.host = name
        self.log: list[str] = []
        self.agent_down = False
        self.ssh_down = False
        self.frozen = threading.Event()  # set: every call blocks (until the test ends)
        self.closed: list[int] = []
        self.uptime = 1000.0
        self.answered_at = 0.0  # when the last agent call it answered came

    def call(self, method: str, timeout: float = 30, **params: Any) -> Any:
        came = time.monotonic()
        if self.frozen.is_set():
            time.sleep(timeout)
            raise AgentError(self.host, f"no answer to {method} within {timeout:g} s")
        if self.agent_down:
            raise AgentError(self.host, "the agent died")
        self.answered_at = came
        if method == "kmsg_cursor":
            return 7
        if method == "kmsg_close":
            self.closed.append(params["cursor"])
            return None
        lines, self.log = self.log, []
        records = [
            {"seq": i, "usec": i, "priority": 4, "facility": 0, "message": m}
            for i, m in enumerate(lines)
        ]
        return {"records": records, "lost": 0}

    def run(self, argv: list[str], timeout: float = 60) -> SimpleNamespace:
        if self.frozen.is_set():
            time.sleep(timeout)
        if self.ssh_down or self.frozen.is_set():
            raise SSHError(self.host, "connection refused")
        assert argv == ["cat", "/proc/uptime"]
        return SimpleNamespace(stdout=f"{self.uptime:.2f} 12.00\n")


class StandInHosts:
    """Where hil.host.hosts.Hosts stands: ``agent(name)`` and ``session(name)``."""

    def __init__(self, *names: str) -> None:
        self.by_name = {n: StandIn(n) for n in names}

    def agent(self, name: str) -> StandIn:
        return self.by_name[name]

    def session(self, name: str) -> StandIn:
        return self.by_name[name]


@pytest.fixture
def pair() -> StandInHosts:
    return StandInHosts("a", "b")


def watch(hosts: StandInHosts, crashes: list[Crash], probe_timeout: float | None = None) -> Watch:
    return Watch(
        hosts,  # type: ignore[arg-type]
        ["a", "b"],
        crashes.append,
        bound=BOUND,
        interval=0.1,
        probe_timeout=probe_timeout,
    ).start()


def wait_for(crashes: list[Crash], within: float) -> float:
    start = time.monotonic()
    while not crashes and time.monotonic() - start < within:
        time.sleep(0.02)
    return time.monotonic() - start


def test_hosts_that_answer_are_not_taken_for_crashed(pair: StandInHosts) -> None:
    crashes: list[Crash] = []
    w = watch(pair, crashes)
    pair.by_name["a"].log.append("siw: device registered")
    time.sleep(BOUND * 2)
    assert w.stop() is None and crashes == []
    assert pair.by_name["a"].closed == [7] and pair.by_name["b"].closed == [7]
    assert w.lines("a") == ("siw: device registered",)


def test_a_panic_line_is_a_kernel_crash_with_the_lines_before_it(pair: StandInHosts) -> None:
    crashes: list[Crash] = []
    w = watch(pair, crashes)
    pair.by_name["b"].log += ["siw0: connect", "Kernel panic - not syncing: Fatal exception"]
    took = wait_for(crashes, 2)
    assert took < 1.0
    assert crashes == [w.crash]
    crash = crashes[0]
    assert (crash.host, crash.kind) == ("b", "kernel_crash")
    assert crash.detail == "Kernel panic - not syncing: Fatal exception"
    assert crash.lines == ("siw0: connect", "Kernel panic - not syncing: Fatal exception")
    w.stop()
    assert pair.by_name["b"].closed == []  # the crashed host is left alone


def test_a_long_report_is_kept_from_its_head_on(pair: StandInHosts) -> None:
    # A KASAN or BUG report runs past KEEP lines; its title and first frames name it
    # (a known finding is recognised by them: hil.judge.known).
    crashes: list[Crash] = []
    w = watch(pair, crashes)
    before = [f"siw0: line {i}" for i in range(20)]
    report = ["kernel BUG at drivers/infiniband/core/iwcm.c:969!"]
    report += [f"  frame_{i}+0x1/0x2" for i in range(KEEP + 20)]
    pair.by_name["b"].log += [*before, *report]
    wait_for(crashes, 2)
    lines = crashes[0].lines
    assert lines[10] == report[0] and lines[:10] == tuple(before[-10:]), lines
    assert len(lines) == KEEP and lines[-1] == f"  frame_{KEEP - 12}+0x1/0x2"
    w.stop()


def test_a_frozen_host_is_unreachable_within_the_bound(pair: StandInHosts) -> None:
    crashes: list[Crash] = []
    # Its blocked probes give up only after 2 x 5 s: a declaration that waited for them
    # would come long after the bound.
    w = watch(pair, crashes, probe_timeout=5)
    time.sleep(0.3)
    a = pair.by_name["a"]
    a.frozen.set()  # its probes block: only the monitor can tell
    wait_for(crashes, BOUND + 5)
    # Counted from its last answer, not from the freeze (a loaded machine may have held
    # the probes back before it); the monitor's tick and a late thread on top of the bound.
    quiet = time.monotonic() - a.answered_at
    w.stop()
    assert len(crashes) == 1, "the frozen host was not declared"
    assert (crashes[0].host, crashes[0].kind) == ("a", "unreachable")
    assert "liveness bound 1 s" in crashes[0].detail
    assert BOUND - 0.3 <= quiet <= BOUND + 2.5, quiet


def test_a_dead_agent_on_a_host_that_answers_ssh_is_no_crash(pair: StandInHosts) -> None:
    crashes: list[Crash] = []
    w = watch(pair, crashes)
    pair.by_name["b"].agent_down = True
    time.sleep(BOUND * 2)
    assert w.stop() is None and crashes == []


def test_a_host_that_rebooted_under_the_test_is_a_kernel_crash(pair: StandInHosts) -> None:
    crashes: list[Crash] = []
    w = watch(pair, crashes)
    time.sleep(0.3)
    b = pair.by_name["b"]
    b.agent_down, b.uptime = True, 0.1  # its agent died with its kernel; SSH is back
    wait_for(crashes, 2)
    w.stop()
    assert [(c.host, c.kind) for c in crashes] == [("b", "kernel_crash")]
    assert crashes[0].detail.startswith("it rebooted during the test (up 0 s, watched for ")


def test_confirm_tells_a_dead_host_from_a_live_one(pair: StandInHosts) -> None:
    crashes: list[Crash] = []
    w = watch(pair, crashes, probe_timeout=5)  # confirm's own bound: 1 + 0.1 + 5 s
    started = time.monotonic()
    assert w.confirm() is None
    assert time.monotonic() - started < 3  # both answered a fresh probe, not the bound
    pair.by_name["b"].agent_down = pair.by_name["b"].ssh_down = True
    crash = w.confirm()
    w.stop()
    assert crash is not None and (crash.host, crash.kind) == ("b", "unreachable")


def test_a_panic_on_the_console_makes_an_unreachable_host_a_kernel_crash() -> None:
    silent = Crash("b", "unreachable", "no answer for 61 s (liveness bound 60 s)")
    console = ["[  33.75] sysrq: Trigger a crash", "[  33.76] Kernel panic - not syncing: x"]
    crash = silent.with_console(console, "console /lab/b.log", console)
    assert crash.kind == "kernel_crash"
    assert (
        crash.detail
        == "[  33.76] Kernel panic - not syncing: x (no answer for 61 s (liveness bound 60 s))"
    )
    assert crash.lines == tuple(console) and crash.source == "console /lab/b.log"
    # A crash line from before the test (an earlier test's) is attached, not believed.
    earlier = silent.with_console(console, "console", ["[  40.1] virtme-ng-init: udev is done"])
    assert earlier.kind == "unreachable" and earlier.detail == silent.detail
    assert earlier.lines == tuple(console)


def test_a_guest_that_rebooted_after_its_panic_has_the_panic_attached_not_its_new_boot() -> None:
    silent = Crash("b", "unreachable", "no answer for 11 s (liveness bound 10 s)")
    before = [f"[  20.{i:02}] siw: line {i}" for i in range(15)]
    boot = [f"[   0.{i:02}] boot line {i}" for i in range(100)]
    fresh = [*before, "[  33.76] Kernel panic - not syncing: x", *boot]
    crash = silent.with_console(fresh[-40:], "console", fresh)
    assert crash.kind == "kernel_crash"
    assert crash.lines[10] == "[  33.76] Kernel panic - not syncing: x"
    assert crash.lines[:10] == tuple(before[-10:]) and len(crash.lines) == KEEP


@pytest.mark.parametrize(
    "line",
    [
        "Kernel panic - not syncing: sysrq triggered crash",
        "Oops: 0002 [#1] PREEMPT SMP NOPTI",
        "BUG: kernel NULL pointer dereference, address: 0000000000000008",
        "kernel BUG at drivers/infiniband/sw/siw/siw_qp.c:123!",
        "general protection fault, probably for non-canonical address 0xdead",
        "watchdog: BUG: soft lockup - CPU#0 stuck for 22s!",
        # 6.1 arch/x86/kernel/traps.c exc_general_protection -> dumpstack.c __die_header
        # "%s: %04lx [#%d]%s%s%s%s%s" (no "Oops: " prefix before 6.12's __die_header)
        "general protection fault, probably for non-canonical address 0xdffffc0000000003: "
        "0000 [#1] PREEMPT SMP KASAN NOPTI",
        "general protection fault: 0000 [#1] PREEMPT SMP NOPTI",
        # 6.12 arch/x86/kernel/dumpstack.c __die_header "Oops: %s: %04lx [#%d]%s%s%s%s%s"
        "Oops: general protection fault, probably for non-canonical address "
        "0xdead000000000122: 0000 [#1] PREEMPT SMP NOPTI",
    ],
)
def test_crash_lines(line: str) -> None:
    assert crash_line(["siw: ok", line]) == line


@pytest.mark.parametrize(
    "line",
    [
        "Oopsie-free siw",
        "debug: BUGS=0",
        # Reports the after-test check fails on (hil.judge.expectations), but after which
        # the kernel runs on: a failed test, not a crashed host.
        "WARNING: CPU: 0 PID: 1 at net/core/dev.c:1234 netdev_run_todo+0x12/0x34",  # panic.c
        "UBSAN: array-index-out-of-bounds in drivers/infiniband/sw/siw/siw_qp.c:123:4",
        "rcu: INFO: rcu_preempt self-detected stall on CPU",  # rcu/tree_stall.h
        "INFO: task kworker/0:1:123 blocked for more than 120 seconds.",  # hung_task.c
        "workqueue: siw_cm_work_handler [siw] hogged CPU for >10000us 4 times, "
        "consider switching to WQ_UNBOUND",  # 6.12 workqueue.c wq_cpu_intensive_report
    ],
)
def test_ordinary_lines_and_reports_the_kernel_survives_are_no_crash(line: str) -> None:
    assert crash_line(["siw: ok", line]) is None
