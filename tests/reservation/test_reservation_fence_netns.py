"""Fencing end to end: a holder paused (SIGSTOP) past its TTL while the next run
takes the pair cannot pull the link under it when it resumes.  A real holder
process (PairRun, heartbeat), real sshd and agents (the netns lab), SQLite and a
real PostgreSQL."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from netnslab import NetnsLab
from pausing import pause_outside_the_store

from hil.host.hosts import Hosts
from hil.host.journal import agent_undo, replay
from hil.reservation import Store, open_store
from hil.run import PairRequest, PairRun

HERE = Path(__file__).parent
PAIR = "ns0-ns1"
TTL = 2.0


def _link(lab: NetnsLab) -> tuple[bool, int]:
    """Whether ns0's data0 is administratively up, and its MTU, as ``ip`` reads them."""
    out = lab.exec(0, ["ip", "-j", "link", "show", "dev", "data0"]).stdout
    [link] = json.loads(out)
    return "UP" in link["flags"], int(link["mtu"])


@pytest.fixture
def holder(netns_lab: NetnsLab, store_url: str) -> Iterator[subprocess.Popen[str]]:
    """tests/reservation/fenced_holder.py holding the pair; resumed and killed at the end."""
    argv = [sys.executable, str(HERE / "fenced_holder.py"), str(netns_lab.inventory_path)]
    proc = subprocess.Popen(
        [*argv, store_url, str(TTL)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=HERE.parent,
    )
    yield proc
    if proc.poll() is None:
        proc.send_signal(signal.SIGCONT)
        proc.kill()
    proc.communicate(timeout=10)


def _say(proc: subprocess.Popen[str], line: str) -> str:
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(line + "\n")
    proc.stdin.flush()
    return proc.stdout.readline().strip()


def test_a_holder_paused_past_its_ttl_cannot_pull_the_link_under_the_next_holder(
    netns_lab: NetnsLab, store_url: str, holder: subprocess.Popen[str]
) -> None:
    assert holder.stdout is not None
    ready = holder.stdout.readline().split()
    assert ready[:1] == ["ready"], f"the holder did not reserve the pair: {ready}"
    old_id, old_token = ready[1], int(ready[2])
    pause_outside_the_store(holder, store_url)
    up, mtu = _link(netns_lab)
    assert up, "ns0's data0 is down before the test"
    request = PairRequest(pair=PAIR, holder="next holder", rdma=False, wait=TTL + 15)
    with open_store(store_url) as store:
        run = PairRun(netns_lab.inventory(), store, request)
        try:
            run.open_hosts()  # waits for the paused holder's lease to expire, takes it over
            assert run.lease.token > old_token
            what = f"restore mtu {mtu} on data0"
            run.journal.change("ns0", agent_undo("set_link", what, netdev="data0", mtu=mtu))
            run.hosts.call("ns0", "set_link", netdev="data0", mtu=mtu - 100)
            holder.send_signal(signal.SIGCONT)
            answer = _say(holder, "pull")
            assert answer.startswith("refused LeaseLost: "), answer
            assert f"lease {old_id} on pair {PAIR}" in answer
            assert "taken over at" in answer and "(next holder)" in answer
            assert f"(lease {run.lease.id})" in answer
            assert _say(holder, "fence").startswith("refused LeaseLost: "), "power fence"
            run.fence()
            # Nothing changed on the host, the new holder's change stands.
            assert _link(netns_lab) == (True, mtu - 100)
            journaled = [e for h in ("ns0", "ns1") for e in store.journal_entries(h)]
            assert [(e.lease_id, e.entry["what"]) for e in journaled] == [(run.lease.id, what)]
            assert _say(holder, "close") == "closed"
            assert holder.wait(timeout=10) == 0
            assert store.renew(run.lease.id).token == run.lease.token
        finally:
            run.close()
            _replay_leftovers(netns_lab, store)
    assert _link(netns_lab) == (True, mtu)


def _replay_leftovers(lab: NetnsLab, store: Store) -> None:
    """Undo what a failed test let the paused holder change: the lab is the session's."""
    if any(store.journal_entries(h) for h in ("ns0", "ns1")):
        inv = lab.inventory()
        with Hosts(inv, store) as hosts:
            replay(hosts, inv.pair(PAIR)).check("cleaning up after the fencing test")
