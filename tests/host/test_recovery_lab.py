"""Recovery of real crashed guests of the session's virtual lab (marker ``lab``).

One guest's QEMU is SIGKILLed (power lost: recovery starts it again), the
other's kernel panics (``echo c > /proc/sysrq-trigger``: recovery power-cycles
it with QMP ``system_reset``), while the pair's cable is pulled in QEMU, a
change that outlives a reboot and sits in the restore journal.  Both are
recovered at once under the run's lease (fenced), and then: the journal is
empty, the cable plugged in again, each health check passed with the siw
device present, the store says healthy, and a CM connect works.

Both recoveries start as soon as the panicking guest's console shows the
panic, not after the panic command's 5 s SSH bound is waited out (the call
never returns; docs/notes/lab-speed.md).
"""

from __future__ import annotations

import os
import signal
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from vlab import VirtualLab, lab_pair_run

from hil import tools
from hil.errors import HilError
from hil.host.healthcheck import HealthCheck
from hil.host.hosts import Hosts
from hil.host.linkctl import LinkControl
from hil.host.recovery import RecoveryFailed, recover
from hil.lab.guests import log_tail
from hil.lab.state import qemu_alive

# It restarts both guests: after the tests that need them as booted (tests/conftest.py).
pytestmark = [pytest.mark.lab, pytest.mark.restarts_guests]

RECOVERY_BOUND = 300.0  # TCG guests booting on a loaded 2-core machine
PANIC_SEEN = 60.0  # the sysrq line reaches the console at once; a loaded TCG guest may lag
# What the kernel prints for ``echo c > /proc/sysrq-trigger`` before it panics
# (drivers/tty/sysrq.c, sysrq_handle_crash's op "trigger a crash", Linux 6.1).
SYSRQ_CRASH = "sysrq: Trigger a crash"


def panic(hosts: Hosts, host: str) -> None:
    """Panic ``host``'s kernel over SSH; the command never returns (its SSH bound, or
    the recovery closing the session, ends it)."""
    argv = tools.argv("sh", "-c", "echo c > /proc/sysrq-trigger")
    with pytest.raises(HilError):
        hosts.session(host).run(argv, timeout=5)


def wait_for_panic(console: Path, start: int) -> None:
    """Return once the guest's console shows the sysrq crash past byte ``start``."""
    deadline = time.monotonic() + PANIC_SEEN
    while SYSRQ_CRASH.encode() not in console.read_bytes()[start:]:
        if time.monotonic() > deadline:
            pytest.fail(f"no {SYSRQ_CRASH!r} within {PANIC_SEEN:g} s:\n{log_tail(console, 30)}")
        time.sleep(0.2)


def test_a_killed_and_a_panicked_guest_come_back_restored_and_connect(
    virtual_lab: VirtualLab, tmp_path: Path
) -> None:
    with lab_pair_run(virtual_lab, tmp_path, "recovery lab test") as run:
        a, b = (h.name for h in run.pair.hosts)
        LinkControl(run.hosts, run.journal).pull(run.pair.name, "carrier")
        assert [e.entry["pull"] for e in run.journal.find((a, b), link=run.pair.name)] == [
            "carrier"
        ]
        killed = next(g for g in virtual_lab.state.guests if g.name == a)
        console_b = Path(next(g.log for g in virtual_lab.state.guests if g.name == b))
        panic_from = console_b.stat().st_size
        os.kill(killed.pid, signal.SIGKILL)
        said: list[str] = []

        def back(host: str) -> HealthCheck:
            try:
                return recover(
                    run.hosts,
                    run.store,
                    host,
                    fence=run.fence,
                    say=said.append,
                    timeout=RECOVERY_BOUND,
                )
            except RecoveryFailed as e:
                guest = next(g for g in virtual_lab.state.guests if g.name == host)
                pytest.fail(f"{e}\nsaid: {said}\nconsole:\n{log_tail(Path(guest.log), 30)}")

        with ThreadPoolExecutor(max_workers=3) as pool:
            panicked = pool.submit(panic, run.hosts, b)
            wait_for_panic(console_b, panic_from)
            results = dict(zip((a, b), pool.map(back, (a, b)), strict=True))
            panicked.result()
        for host, result in results.items():
            assert result.ok, result.summary()
            rdma = [c for c in result.checks if c.name == "rdma"]
            assert rdma and all(c.status == "ok" for c in rdma), (host, rdma)
        assert [h.state for h in run.store.host_health([a, b])] == ["healthy", "healthy"]
        assert run.store.journal_entries(a) == [] and run.store.journal_entries(b) == []
        state = LinkControl(run.hosts, run.journal).state(run.pair.name)
        assert state.pulled == () and state.a.carrier and state.b.carrier

        restarted = next(g for g in virtual_lab.state.guests if g.name == a)
        assert restarted.pid != killed.pid and qemu_alive(restarted)
        assert "started again" in Path(restarted.log).read_text(errors="replace")
        after_panic = console_b.read_text(errors="replace").split(SYSRQ_CRASH)
        assert len(after_panic) == 2 and "Linux version" in after_panic[1], "no reboot after it"
        assert f"{a}: power cycle" in said and f"{b}: power cycle" in said

        timeline = run.session().run("connect", private_data=b"after-recovery")
        events = [(e.type, e.status) for e in timeline.events if e.side == "a"]
        assert ("ESTABLISHED", 0) in events, events
