"""Destroy racing the connect reply, run on the hosts themselves: is any event stamped after
``rdma_destroy_id`` returned?

    .venv/bin/python bench/destroy_reply_race.py --inventory "$(hil lab inventory)" \\
        --store /tmp/hil-bench-race.db [--rounds 300] [--budget 150]

The passive host runs an auto-accepting listener, the active host ``--rounds``
rounds of: connect, destroy after a delay drawn from 0 .. twice the reply's
latency (calibrated first), both in the agent's own CM worker code
(``hil_agent.remote.cm.worker.Worker`` over ``CMChannel``, its poller stamping
events) but driven by a script on the host, with no controller in between.
Per round it times the destroy the way the worker did before the fix (its
start stamped before the call, ``us`` the channel's own measurement from a
later start: ``t_us + us``) and reads the host clock again right after the
call returned (the true end; the worker reports that one now).

Prints, over all rounds: the events of destroyed ids stamped after the old
reported end (what the timeline's no-event-after-destroy rule compared
against) and after the true end, how far those were, and the largest gap
between the two ends.  This is
the evidence for docs/races.md's finding of CONNECT_ERROR(-22) "after"
its destroy: see there (the runs: docs/notes/race-sweeps.md).
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
from typing import TypedDict

import benchmain  # bench/, beside this script

from hil.agent import build
from hil.agent.deploy import REMOTE_DIR
from hil.errors import AgentError
from hil.inventory import loader
from hil.reservation import open_store
from hil.run import PairRequest, PairRun

# Runs on a host: python3 -c HOST_SCRIPT PYZ listen ADDRESS PORT HOLD_S
#                                        PYZ race ADDRESS PORT SRC ROUNDS BUDGET_S
HOST_SCRIPT = r"""
import json, os, random, sys, threading, time
sys.path.insert(0, os.path.expanduser(sys.argv[1]))
from hil_agent.remote.hostclock import now_us
from hil_agent.remote.cm.worker import Worker
from hil_agent.remote.librdmacm import CMChannel, RdmaError
role, address, port = sys.argv[2], sys.argv[3], int(sys.argv[4])
w = Worker(CMChannel())
threading.Thread(target=w.poller.run, daemon=True).start()
if role == "listen":
    w.listen(address, port, backlog=64, auto="accept")
    time.sleep(float(sys.argv[5]))
    w.poller.closing.set()
    print(json.dumps({"accepted": sum(1 for e in w.log.entries if e.get("name") == "accept")}))
    sys.exit(0)
src, rounds, budget_s = sys.argv[5], int(sys.argv[6]), float(sys.argv[7])
time.sleep(3)  # the listener's python starts meanwhile
stop_at = time.monotonic() + budget_s
sys.setswitchinterval(0.0002)  # as a scenario script runs
lat = []
for i in range(5):
    mark = len(w.log.entries)
    c = w.connect(address, port, src)
    e = w._wait_event(c["id"], ["ESTABLISHED"], mark, 10.0)
    lat.append(e["host_t_us"] - c["t_us"] - c["us"])
    w.destroy(c["id"])
latency = sorted(lat)[2]
out = []
for i in range(rounds):
    if time.monotonic() > stop_at:
        break
    delay = random.randint(0, 2 * latency)
    try:
        c = w.connect(address, port, src)
    except RdmaError as e:
        out.append({"connect": str(e)})
        continue
    target = c["t_us"] + c["us"] + delay
    while now_us() < target:
        time.sleep(0)
    t0 = now_us()  # as the worker stamped a destroy's start before the fix
    took = w.ch.destroy_id(c["id"])  # timed by the channel from its own, later start
    true_end = now_us()
    out.append({"id": c["id"], "delay": delay, "t_us": t0, "us": took, "end": true_end})
time.sleep(0.5)
events = [e for e in w.log.entries if e["kind"] == "event"]
print(json.dumps({"latency": latency, "rounds": out, "events": events}))
"""


class _Event(TypedDict):
    """One CM event the host script's worker logged (the fields the summary reads)."""

    id: int
    type: str
    status: int
    host_t_us: int


class _Round(TypedDict, total=False):
    """One destroy round: its timings, or the error its connect met (then no id)."""

    id: int
    delay: int
    t_us: int
    us: int
    end: int
    connect: str


class _Got(TypedDict):
    """The host script's last line: reply latency, destroy rounds and events."""

    latency: int
    rounds: list[_Round]
    events: list[_Event]


def _summary(got: _Got) -> None:
    rounds = [r for r in got["rounds"] if "id" in r]
    events = got["events"]
    by_id: dict[int, list[_Event]] = {}
    for e in events:
        by_id.setdefault(e["id"], []).append(e)
    after_reported, after_true, gaps = [], [], []
    for r in rounds:
        reported = r["t_us"] + r["us"]
        gaps.append(r["end"] - reported)
        for e in by_id.get(r["id"], []):
            if e["host_t_us"] > reported:
                after_reported.append((e["type"], e["status"], e["host_t_us"] - reported))
            if e["host_t_us"] > r["end"]:
                after_true.append((e["type"], e["status"], e["host_t_us"] - r["end"]))
    kinds: dict[str, int] = {}
    for e in events:
        if e["type"] in ("ESTABLISHED", "CONNECT_ERROR", "REJECTED", "DISCONNECTED"):
            key = f"{e['type']}({e['status']})"
            kinds[key] = kinds.get(key, 0) + 1
    print(f"rounds {len(rounds)}, reply latency {got['latency']} us; events seen: {kinds}")
    print(
        f"events stamped after the end the worker reported (t_us + us): {len(after_reported)} "
        f"{sorted(after_reported, key=lambda x: -x[2])[:5]}"
    )
    print(f"events stamped after the true end (clock read after the call): {len(after_true)}")
    gaps.sort()
    print(
        f"true end - reported end: median {gaps[len(gaps) // 2]} us, max {gaps[-1]} us, "
        f"> 500 us in {sum(g > 500 for g in gaps)} rounds"
    )


def main() -> int:
    """Reserve and set up the pair, run both host scripts, print what they saw."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--inventory", required=True)
    p.add_argument("--store", required=True)
    p.add_argument("--pair", help="pair name (default: the inventory's first)")
    p.add_argument("--rounds", type=int, default=300)
    p.add_argument("--budget", type=float, default=150.0, help="stop the rounds after S seconds")
    p.add_argument("--wait", type=float, default=0.0, help="queue for the pair up to S seconds")
    args = p.parse_args()
    inv = loader.load(args.inventory)
    request = PairRequest(
        pair=args.pair or inv.pairs()[0].name, holder="bench/destroy_reply_race.py", ttl=900,
        wait=args.wait,
    )  # fmt: skip
    pyz = f"~/{REMOTE_DIR}/{build().sha256}.pyz"
    with open_store(args.store) as store, PairRun(inv, store, request) as run:
        s = run.session(evidence=False)
        port, hold = s.port(), args.budget + 60
        passive_argv = ["python3", "-c", HOST_SCRIPT, pyz, "listen", s.address("b"), str(port)]

        def listen() -> None:
            try:
                s.agent("b").run([*passive_argv, str(hold)], timeout=hold + 30)
            except AgentError:
                pass  # cut when the pair run ends: its agents close

        listener = threading.Thread(target=listen, daemon=True)
        listener.start()
        argv = ["python3", "-c", HOST_SCRIPT, pyz, "race", s.address("b"), str(port)]
        argv += [s.address("a"), str(args.rounds), str(args.budget)]
        got = s.agent("a").run(argv, timeout=hold, check=True)
        _summary(json.loads(got.stdout.strip().splitlines()[-1]))
    return 0


if __name__ == "__main__":
    sys.exit(benchmain.run("destroy_reply_race", main))
