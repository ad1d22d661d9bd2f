"""Fault campaign: the controller SIGKILLed in the middle of a link pull (netns lab).

tests/host/test_linkctl.py kills a run *after* its pull.  Here the run (killed_run.py, a
real process) is killed *between* journaling the pull and making it, in each mode, and
*while the host makes it* (a ``command`` pull whose controller command is slow).  Each
test checks what the killed run left (the entry journaled under its lease; the host
changed or not), what the next run finds and does (its reservation takes the dead lease
over, its replay undoes the entry), and that the link is whole again.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from faultlab import running, wait_for
from netnslab import NetnsLab

from hil.host.hosts import Hosts
from hil.host.journal import Journal, replay
from hil.host.linkctl import LinkControl
from hil.inventory import load
from hil.inventory.model import Inventory
from hil.reservation import Claim, Holder, Store, reserve

LINK = "ns0-ns1"
HERE = Path(__file__).parent
TTL = 2.0  # the killed run's lease: the next run takes it over this long after the kill


@pytest.fixture
def killed(netns_lab: NetnsLab) -> Iterator[list[subprocess.Popen[str]]]:
    """Runs started by the test; any left running are killed at the end, and the shared
    lab's link is put back by hand whatever the test left (its checks are the test's)."""
    runs: list[subprocess.Popen[str]] = []
    yield runs
    for run in runs:
        run.kill()
        run.communicate(timeout=10)
    for index in (0, 1):
        netns_lab.exec(index, ["ip", "link", "set", "dev", "data0", "up"], check=False)
        table = ["nft", "delete", "table", "netdev", "hil_blackhole_data0"]
        netns_lab.exec(index, table, check=False)


def _start(runs: list[subprocess.Popen[str]], inventory: Path, store: Store, *args: str) -> str:
    """killed_run.py with ``args``; its first line, once it printed one."""
    argv = [sys.executable, str(HERE / "killed_run.py"), str(inventory), str(store.url), str(TTL)]
    run = subprocess.Popen(
        [*argv, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    runs.append(run)
    assert run.stdout is not None
    line = run.stdout.readline().strip()
    if not line:
        run.kill()
        raise AssertionError(f"the run printed nothing: {run.communicate(timeout=10)[1]}")
    return line


def _kill(run: subprocess.Popen[str]) -> None:
    run.send_signal(signal.SIGKILL)
    assert run.wait(timeout=10) == -signal.SIGKILL


def _next_run(inventory: Inventory, store: Store, dead_lease: str) -> tuple[str, ...]:
    """What the next run does first: reserve the pair (taking the dead lease over once it
    expires) and replay the journal; returns what the replay undid."""
    pair = inventory.pair(LINK)
    claim = Claim(pair.name, (pair.host_a.name, pair.host_b.name))
    lease = reserve(store, [claim], Holder.current("next run"), ttl=30, wait=15, poll=0.2)
    assert lease.id != dead_lease
    assert [x.id for x in store.leases()] == [lease.id], "the dead lease was not taken over"
    with Hosts(inventory, store) as hosts:
        report = replay(hosts, pair)
    store.release(lease.id)
    assert report.failed == (), report.failed
    return report.undone


def _link_whole(lab: NetnsLab, inventory: Inventory, store: Store) -> None:
    """Both ends up with carrier, no blackhole, nothing journaled, and traffic flows."""
    with Hosts(inventory, store) as hosts:
        state = LinkControl(hosts, Journal(hosts, store, "check")).state(LINK)
    for end in (state.a, state.b):
        assert (end.up, end.carrier, end.blackholed) == (True, True, False), end
    assert state.pulled == ()
    assert store.journal_entries("ns0") == store.journal_entries("ns1") == []
    lab.exec(0, ["ping", "-c", "1", "-w", "5", "198.18.0.2"])


@pytest.mark.parametrize(
    ("mode", "undo"),
    [
        ("admin", "ns0: set data0 up (link ns0-ns1)"),
        ("blackhole", "ns1: remove the blackhole of data0 (link ns0-ns1)"),
    ],
)
def test_a_run_killed_between_journaling_a_pull_and_making_it(
    netns_lab: NetnsLab, store: Store, killed: list[subprocess.Popen[str]], mode: str, undo: str
) -> None:
    inventory = netns_lab.inventory()
    line = _start(killed, netns_lab.inventory_path, store, "pull", LINK, mode)
    assert line.startswith("journaled "), line
    dead_lease = line.split()[1]
    _kill(killed[0])
    # The killed run left its entry, under its lease, and made no change.
    (entry,) = [e for h in ("ns0", "ns1") for e in store.journal_entries(h)]
    assert (entry.lease_id, entry.entry["pull"]) == (dead_lease, mode)
    with Hosts(inventory, store) as hosts:
        state = LinkControl(hosts, Journal(hosts, store, "look")).state(LINK)
    assert state.pulled == (mode,), "the journal must say a pull may be in place"
    assert (state.a.up, state.b.blackholed) == (True, False), "the change was made"
    # The next run undoes an entry whose change never happened: a harmless no-op.
    assert _next_run(inventory, store, dead_lease) == (undo,)
    _link_whole(netns_lab, inventory, store)


def _slow_command_pull(lab: NetnsLab, tmp_path: Path, delay: float) -> Path:
    """The lab's inventory plus a ``command`` pull whose controller (ns0) takes ``delay``
    seconds before it takes ns0's data0 down."""
    doc = yaml.safe_load(lab.inventory_path.read_text())
    doc["links"][LINK]["pull"].append(
        {
            "mode": "command",
            "controller": "ns0",
            "end": "ns0:p0",
            "down": ["sh", "-c", "sleep {delay}; exec ip link set dev data0 down"],
            "up": ["ip", "link", "set", "dev", "data0", "up"],
            "vars": {"delay": str(delay)},
        }
    )
    path = tmp_path / "inventory.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def test_a_run_killed_while_its_controller_command_runs_leaves_no_late_change(
    netns_lab: NetnsLab, store: Store, killed: list[subprocess.Popen[str]], tmp_path: Path
) -> None:
    delay = 3.0
    path = _slow_command_pull(netns_lab, tmp_path, delay)
    inventory = load(path)
    argv = [sys.executable, str(HERE / "killed_run.py"), str(path), str(store.url), str(TTL)]
    run = subprocess.Popen([*argv, "pull", LINK, "command", "--after"], text=True)
    killed.append(run)
    sleeping = ["sleep", str(delay)]
    assert wait_for(lambda: running(netns_lab, 0, sleeping) != [], timeout=20), "no command"
    _kill(run)
    # The killed run's command was under way: journaled, the link not yet down.
    (entry,) = store.journal_entries("ns0")
    assert entry.entry["pull"] == "command" and _data0_up(netns_lab)
    # Its controller command dies with its connection (hil.ssh's watcher), before it acts.
    assert wait_for(lambda: running(netns_lab, 0, sleeping) == [], timeout=delay - 1), (
        "the killed run's controller command still runs on the controller"
    )
    undone = _next_run(inventory, store, entry.lease_id)
    assert undone == ("ns0: run the up command of link ns0-ns1",)
    time.sleep(delay)  # past the point where the orphaned command would have acted
    assert _data0_up(netns_lab), "the killed run's command took the link down after the replay"
    _link_whole(netns_lab, inventory, store)


def _data0_up(lab: NetnsLab) -> bool:
    return "UP" in lab.exec(0, ["ip", "-br", "link", "show", "data0"]).stdout.split()[1]
