"""Fault campaign on the virtual lab's siw guests (the session's lab, marked ``lab``).

- The controller SIGKILLed in the middle of pair setup's siw device creation: a real run
  (killed_run.py) stops right after journaling the second host's device, so the first
  host's device was made and the second's was not; the next run's replay deletes what
  was made and finds the rest already gone.
- A guest's wall clock stepped by minutes during a run (``date -s``, journaled, so the
  run's restore steps it back): the clock offsets (CLOCK_MONOTONIC) do not move, a CM
  sequence's timeline and metrics are unaffected, a capture's placement says the step and
  the uncertainty it makes, and the lease (the store's clock, never a host's) runs on.
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from vlab import VirtualLab, lab_pair_run

from hil.agent import Agent
from hil.cm.clock import agent_now, estimate, wall_sample
from hil.host.hosts import Hosts
from hil.host.journal import agent_undo
from hil.lab import control
from hil.reservation import open_store
from hil.run import PairRequest, PairRun
from hil.wire.clock import place

pytestmark = pytest.mark.lab

HERE = Path(__file__).parent
TTL = 2.0
STEP_S = 300


def _siw_devices(hosts: Hosts, host: str) -> set[str]:
    return {d.name for d in hosts.agent(host).rdma_devices() if d.name.startswith("siw_")}


@pytest.fixture
def without_lab_siw(virtual_lab: VirtualLab) -> Iterator[Hosts]:
    """The lab's guests (their agents, to look at them) with the siw devices they make at
    boot deleted, so that pair setup creates them (its siw fallback); made again at the
    end, whatever the test did."""
    ports = [(h.name, r.netdev, r.rdma_device) for h in virtual_lab.pair.hosts for r in h.rnics]
    with Hosts(virtual_lab.inventory) as hosts:
        for host, _, device in ports:
            if device in _siw_devices(hosts, host):
                hosts.agent(host).delete_rdma_link(str(device))
        try:
            yield hosts
        finally:
            for host, netdev, device in ports:
                if device not in _siw_devices(hosts, host):
                    hosts.agent(host).add_siw(str(device), netdev)


def test_a_run_killed_during_siw_device_creation_is_undone_by_the_next(
    virtual_lab: VirtualLab, without_lab_siw: Hosts, tmp_path: Path
) -> None:
    store_url = str(tmp_path / "store.db")
    pair = virtual_lab.pair
    inventory = control.inventory_path(virtual_lab.dir)
    argv = [sys.executable, str(HERE / "killed_run.py"), str(inventory), store_url, str(TTL)]
    run = subprocess.Popen(
        [*argv, "setup", pair.name, "2"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert run.stdout is not None
        line = run.stdout.readline().strip()
        if not line.startswith("journaled "):
            run.kill()
            raise AssertionError(f"the run did not get there: {line!r} {run.communicate()[1]}")
        run.send_signal(signal.SIGKILL)
        assert run.wait(timeout=10) == -signal.SIGKILL
    finally:
        run.kill()
        run.communicate(timeout=10)
    dead_lease = line.split()[1]
    a, b = pair.host_a.name, pair.host_b.name
    with open_store(store_url) as store:
        # The killed run's journal: one siw device entry per host, under its lease.
        entries = [e for h in (a, b) for e in store.journal_entries(h)]
        assert {e.lease_id for e in entries} == {dead_lease}
        siw = sorted(e.host for e in entries if "delete siw device" in e.entry["what"])
        assert siw == sorted((a, b)), [e.entry for e in entries]
        # On the guests: the first host's device was made, the second's was not.
        guests = without_lab_siw
        assert len(_siw_devices(guests, a)) == 1 and _siw_devices(guests, b) == set()
        # The next run: its reservation takes the dead lease over, its replay undoes both.
        request = PairRequest(pair=pair.name, holder="next run", ttl=60, wait=30)
        nxt = PairRun(virtual_lab.inventory, store, request)
        try:
            hosts = nxt.open_hosts()  # (not set_up: that would make devices of its own)
            assert nxt.lease.id != dead_lease
            assert store.journal_entries(a) == store.journal_entries(b) == []
            assert _siw_devices(hosts, a) == _siw_devices(hosts, b) == set()
        finally:
            nxt.close()
        assert store.leases() == []


def test_a_guest_clock_stepped_by_minutes_during_a_run(
    virtual_lab: VirtualLab, tmp_path: Path
) -> None:
    host = virtual_lab.pair.host_a.name
    with lab_pair_run(virtual_lab, tmp_path, "clock step") as run:
        agent = run.hosts.agent(host)
        skew = _skew_s(agent)
        offset = estimate(host, agent_now(agent))
        sample = wall_sample(agent)
        # The step, journaled first like every change: the run's restore steps it back.
        back = agent_undo("run", f"step the clock back {STEP_S} s", argv=_date(-STEP_S))
        run.journal.change(host, back)
        agent.run(_date(STEP_S), check=True)
        assert abs(_skew_s(agent) - skew - STEP_S) < 5, "the guest's clock did not step"
        # The clock offset is of CLOCK_MONOTONIC, which no step moves.
        moved = estimate(host, agent_now(agent))
        bound = offset.uncertainty_us + moved.uncertainty_us + DRIFT_US
        assert abs(moved.offset_us - offset.offset_us) <= bound, (offset, moved)
        # A capture across the step: placed, with the step said and its uncertainty.
        placement = place({"cap": (sample, wall_sample(agent))}, [moved])
        (note,) = placement.notes
        said = re.fullmatch(
            rf"cap: {host}'s wall clock was stepped by \+([\d.]+) s during the capture; "
            r"its packets are placed to within [\d.]+ s",
            note,
        )
        assert said and abs(float(said.group(1)) - STEP_S) < 5, note
        assert placement.uncertainty_us["cap"] >= (STEP_S - 1) * 1_000_000
        # A CM sequence after the step: its timeline is on the controller's monotonic clock.
        timeline = run.session("a-b", evidence=False).run("connect")
        assert 0 < timeline.metrics["connect_us"] < 10_000_000, timeline.metrics
        assert {o.host for o in timeline.offsets} >= {host}
        # The lease runs on the store's clock (here the controller's), never a host's.
        lease = run.store.get(run.lease.id)
        assert lease.expires.timestamp() > time.time()
    # The run's restore stepped the guest back.
    with Hosts(virtual_lab.inventory) as hosts:
        assert abs(_skew_s(hosts.agent(host)) - skew) < 5, "the guest's clock was not restored"


DRIFT_US = 50_000  # what a TCG guest's monotonic clock may drift from ours in a test


def _date(step_s: int) -> list[str]:
    """``date -s`` relative to now: a step that keeps the time passed meanwhile."""
    return ["date", "-s", f"{step_s:+d} seconds"]


def _skew_s(agent: Agent) -> float:
    """How far the host's wall clock is ahead of ours (s)."""
    sample = wall_sample(agent)
    return sample.wall_us / 1e6 - time.time()
