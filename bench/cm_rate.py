"""hil's connect+disconnect rate against rdma-core's cmtime, on one pair in one run.

    .venv/bin/python bench/cm_rate.py --inventory /tmp/hil-devlab/inventory.yaml \\
        --store /tmp/hil-devlab/store.db --wait 900 -c 16 --rounds 9 [--processes P]

Reserves the pair, sets it up, runs ``--warmup`` rounds of both (not counted:
the first storm's workers and the first cmtime start cold), then ``--rounds``
rounds of one of each, hil first in odd rounds and cmtime first in even ones,
so that a load drifting through a round favours neither:

- hil: a storm run by the hosts' workers (:func:`hil.cm.storm.run_storm`:
  ``-c`` connections from ``--processes`` processes, ``--parallel`` threads
  each issuing rdma_connect, answered by ``--listeners`` serving processes);
  rate = connections / (connect span + disconnect span), cmtime's measure,
  and the full cycle (first create_id to last destroy);
- cmtime: ``cmtime -b B -p PORT -c N`` on host B, ``cmtime -s B -p PORT -c N``
  on host A; rate = connections / (its connect + disconnect step totals), and
  the full cycle (every step, create id to destroy).

The two count the same steps: connect = first ``rdma_connect`` to the last
ESTABLISHED (the passive side's QP creation and accept inside it, on both);
disconnect = first ``rdma_disconnect`` (then ``rdma_destroy_qp``, on both) to
the last DISCONNECTED.  The controller's load average is printed before and
after: the two cores are shared, and the rates move with it.

Prints hil's per-step table of the last round, how long its rdma_connect and
disconnect (+ destroy_qp) calls themselves blocked (p50 / max / sum, µs: the
rest of a span is waiting for events), the median of each rate, the ratio
hil / cmtime of the medians and of each round (a storm and the cmtime run
beside it share the machine's load), with the per-round ratios' median and
geometric mean.  Numbers, no asserts.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import benchmain  # bench/, beside this script

from hil import tools
from hil.cm.session import CMSession
from hil.cm.storm import run_storm
from hil.cm.stormstats import StormResult, percentile
from hil.cm.toolpeers import stop_command
from hil.errors import CommandTimeout
from hil.inventory import loader
from hil.judge.timeline import Timeline
from hil.reservation import open_store
from hil.run import PairRequest, PairRun

CMTIME_TIMEOUT = 120.0


def cmtime_steps(output: str) -> dict[str, float]:
    """``{step: total ms}`` from cmtime's table (``connect      :  12.3  ...``)."""
    steps = {}
    for line in output.splitlines():
        name, sep, rest = line.partition(":")
        fields = rest.split()
        if sep and fields:
            try:
                steps[name.strip()] = float(fields[0])
            except ValueError:
                continue
    return steps


def run_cmtime(s: CMSession, count: int) -> tuple[dict[str, float], str]:
    """One cmtime client/server run across the pair; its step totals (ms) and its output."""
    port = str(s.port())
    server_addr = s.address(s.passive)
    server = s.agent(s.passive)
    result: dict[str, object] = {}

    argv = tools.argv("cmtime", "-b", server_addr, "-p", port, "-c", str(count))

    def serve() -> None:
        try:
            result["server"] = server.run(argv, timeout=CMTIME_TIMEOUT)
        except CommandTimeout as e:
            result["server"] = e

    t = threading.Thread(target=serve)
    t.start()
    time.sleep(2.0)  # the server's listen, on a slow guest
    client = s.agent(s.active).run(
        tools.argv("cmtime", "-s", server_addr, "-p", port, "-c", str(count)),
        timeout=CMTIME_TIMEOUT,
    )
    t.join(5)
    if t.is_alive():
        # This server (its argv names our fresh port) may wait for more clients: stop it.
        stop_command(server, argv)
        t.join(CMTIME_TIMEOUT + 10)
    if client.status != 0:
        raise SystemExit(f"cmtime client failed ({client.status}): {client.stderr.strip()}")
    steps = cmtime_steps(client.stdout)
    if "connect" not in steps or "disconnect" not in steps:
        raise SystemExit(f"cannot read cmtime's output:\n{client.stdout}")
    return steps, client.stdout


def hil_first(round_no: int) -> bool:
    """Whether hil runs before cmtime in counted round ``round_no`` (0-based): every other
    round, so that a load rising (or falling) through the run favours neither."""
    return round_no % 2 == 0


def summary(ratios: list[float]) -> str:
    """The per-round ratios' median and geometric mean (a ratio's mean of logs: 2.0 and
    0.5 average to 1), and the rounds."""
    geo = math.exp(statistics.fmean(math.log(r) for r in ratios)) if all(ratios) else 0.0
    return f"{statistics.median(ratios):8.3f}  (median; geometric mean {geo:.3f}; rounds: " + (
        _list(ratios, 2) + ")"
    )


def _list(rates: list[float], digits: int = 1) -> str:
    return ", ".join(f"{r:.{digits}f}" for r in rates)


def calls(tl: Timeline, name: str) -> str:
    """How long the storm's ``name`` calls blocked on their host: p50 / max / sum (µs)."""
    took = sorted(a.duration_us for a in tl.actions if a.name == name and a.duration_us is not None)
    if not took:
        return "none"
    return f"{percentile(took, 50)} / {took[-1]} / {sum(took)}"


def one_round(
    s: CMSession, args: argparse.Namespace, hil_before: bool
) -> tuple[Timeline, StormResult, dict[str, float], str]:
    """One storm and one cmtime run, in the order asked: the storm's timeline and numbers,
    cmtime's step totals (ms) and its output."""

    def storm() -> tuple[Timeline, StormResult]:
        tl, result = run_storm(
            s,
            args.connections,
            processes=args.processes,
            listeners=args.listeners,
            parallel=args.parallel,
        )
        if result.failed or result.closed_active != args.connections:
            raise SystemExit(f"hil's storm did not complete:\n{result.table()}")
        return tl, result

    if hil_before:
        tl, result = storm()
        steps, table = run_cmtime(s, args.connections)
    else:
        steps, table = run_cmtime(s, args.connections)
        tl, result = storm()
    return tl, result, steps, table


def main() -> int:
    """Parse arguments, reserve and set up the pair, run both, print the comparison."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--inventory", required=True)
    p.add_argument("--store", required=True)
    p.add_argument("--pair", help="pair name (default: the inventory's first)")
    p.add_argument("-c", "--connections", type=int, default=16)
    p.add_argument("--rounds", type=int, default=9, help="counted rounds (default 9)")
    p.add_argument("--warmup", type=int, default=1, help="rounds run first, not counted")
    p.add_argument("--processes", type=int, default=1, help="hil's active processes")
    p.add_argument("--listeners", type=int, default=1, help="hil's serving processes")
    p.add_argument(
        "--parallel", type=int, default=1, help="threads issuing rdma_connect (1: cmtime's)"
    )
    p.add_argument("--wait", type=float, default=0.0, help="queue for the pair up to S seconds")
    args = p.parse_args()
    if args.rounds < 1 or args.warmup < 0:
        p.error("--rounds must be at least 1 and --warmup at least 0")
    inv = loader.load(args.inventory)
    request = PairRequest(
        pair=args.pair or inv.pairs()[0].name, holder="bench/cm_rate.py", ttl=900, wait=args.wait
    )
    hil_rates, hil_full, cm_rates, cm_full = [], [], [], []
    load_before = os.getloadavg()
    with open_store(args.store) as store, PairRun(inv, store, request) as run:
        pair = run.pair
        s = run.session(evidence=False)
        for k in range(-args.warmup, args.rounds):
            tl, result, steps, table = one_round(s, args, hil_first(k))
            cm_rate = args.connections * 1000 / (steps["connect"] + steps["disconnect"])
            print(
                f"{'warm-up' if k < 0 else f'round {k + 1}'} ({'hil' if hil_first(k) else 'cmtime'}"
                f" first): hil {result.rate_per_s:.1f}, cmtime {cm_rate:.1f} conn/s, load "
                f"{os.getloadavg()[0]:.2f}",
                flush=True,
            )
            if k < 0:
                continue
            hil_rates.append(result.rate_per_s)
            hil_full.append(result.cycle_rate_per_s)
            cm_rates.append(cm_rate)
            cm_full.append(args.connections * 1000 / sum(steps.values()))
    hil, hfull, cmt, full = (statistics.median(x) for x in (hil_rates, hil_full, cm_rates, cm_full))
    print("hil (last round, us):")
    print(result.table())
    print(f"  rdma_connect calls blocked (p50 / max / sum):       {calls(tl, 'connect')}")
    print(f"  disconnect + destroy_qp calls (p50 / max / sum):    {calls(tl, 'disconnect')}")
    print("cmtime (last round):")
    print("\n".join(line for line in table.splitlines() if ":" in line or "step" in line))
    print(
        f"pair {pair.name}, {args.connections} connections, {args.rounds} rounds (median) "
        f"after {args.warmup} warm-up; "
        f"hil: {args.processes} processes x {args.parallel} connect threads, "
        f"{args.listeners} listeners"
    )
    print(f"hil connect+disconnect steps:     {hil:8.1f} conn/s  (rounds: {_list(hil_rates)})")
    print(f"cmtime connect+disconnect steps:  {cmt:8.1f} conn/s  (rounds: {_list(cm_rates)})")
    print(f"hil full cycle (all steps):       {hfull:8.1f} conn/s  (rounds: {_list(hil_full)})")
    print(f"cmtime full cycle (all steps):    {full:8.1f} conn/s  (rounds: {_list(cm_full)})")
    print(f"ratio hil / cmtime:               {hil / cmt:8.3f}  (full cycle: {hfull / full:.3f})")
    ratios = [h / c for h, c in zip(hil_rates, cm_rates, strict=True)]
    print(f"ratio per round:                  {summary(ratios)}")
    first = ", ".join(str(k + 1) for k in range(args.rounds) if hil_first(k))
    print(f"hil ran first in rounds {first}, cmtime in the others")
    loads = (load_before, os.getloadavg())
    print(
        "controller load average (1, 5, 15 min) before / after: "
        + " / ".join(", ".join(f"{x:.2f}" for x in load) for load in loads)
    )
    return 0


if __name__ == "__main__":
    sys.exit(benchmain.run("cm_rate", main))
