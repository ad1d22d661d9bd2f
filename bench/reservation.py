#!/usr/bin/env python3
"""Reservation latency: reserve + release, with 1 and 16 contending processes.

Prints, for each store (SQLite file, PostgreSQL), the median and p99 of one
reserve+release cycle in milliseconds and the total rate:

- ``own pairs``: each process takes any of 32 disjoint pairs, so processes
  contend for the store's write lock only (wait=0, never busy);
- ``shared pairs``: all processes queue (--wait) for 4 pairs that share
  hosts, so a cycle includes waiting for the others' holds.

PostgreSQL is a private server started here with its default durability
(fsync on), unless --pg-url names one (a scratch database is created on it
and dropped).  Usage: .venv/bin/python bench/reservation.py [--pg-url URL]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

import benchmain  # bench/, beside this script

from hil.reservation import Claim, Holder, open_store, reserve
from hil.reservation.pgcluster import private_cluster, scratch_database

OWN = [Claim(f"own{i}", (f"o{i}a", f"o{i}b")) for i in range(32)]
SHARED = [
    Claim("s01", ("s0", "s1")),
    Claim("s12", ("s1", "s2")),
    Claim("s23", ("s2", "s3")),
    Claim("s30", ("s3", "s0")),
]


def worker(url: str, scenario: str, cycles: int) -> None:
    """Run in a child: wait for 'go' on stdin, then time ``cycles`` cycles."""
    claims = OWN if scenario == "own" else SHARED
    holder = Holder.current(note="bench")
    latencies = []
    with open_store(url, timeout=60) as store:
        print("ready", flush=True)
        sys.stdin.readline()
        for _ in range(cycles):
            start = time.perf_counter()
            lease = reserve(
                store, claims, holder, ttl=60, wait=120 if scenario == "shared" else 0, poll=0.01
            )
            store.release(lease.id)
            latencies.append(time.perf_counter() - start)
    print(json.dumps(latencies), flush=True)


def run(url: str, scenario: str, procs: int, cycles: int) -> tuple[list[float], float]:
    """All latencies of ``procs`` workers, and the wall time from 'go' to the last."""
    children = [
        subprocess.Popen(
            [sys.executable, __file__, "--worker", url, scenario, str(cycles)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(procs)
    ]
    try:
        for c in children:
            assert c.stdout is not None and c.stdout.readline().strip() == "ready"
        started = time.perf_counter()
        for c in children:
            assert c.stdin is not None
            c.stdin.write("go\n")
            c.stdin.flush()
        latencies: list[float] = []
        for c in children:
            out, _ = c.communicate(timeout=600)
            if c.returncode != 0:
                raise SystemExit(f"bench worker failed with exit {c.returncode}")
            latencies += json.loads(out)
        return latencies, time.perf_counter() - started
    finally:
        for c in children:
            if c.poll() is None:
                c.kill()
                c.wait()


def report(store: str, scenario: str, procs: int, latencies: list[float], wall: float) -> None:
    ms = sorted(x * 1000 for x in latencies)
    p99 = ms[min(len(ms) - 1, int(0.99 * len(ms)))]
    print(
        f"{store:<10} {scenario:<13} {procs:>3} {len(ms):>6} "
        f"{statistics.median(ms):>10.2f} {p99:>10.2f} {len(ms) / wall:>9.0f}",
        flush=True,
    )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--worker", nargs=3, help=argparse.SUPPRESS)
    parser.add_argument("--pg-url", help="an existing PostgreSQL server (default: start one)")
    parser.add_argument("--cycles", type=int, default=400, help="cycles per run (default 400)")
    parser.add_argument("--stores", default="sqlite,postgres", help="comma-separated")
    args = parser.parse_args()
    if args.worker:
        worker(args.worker[0], args.worker[1], int(args.worker[2]))
        return 0
    print(
        f"{'store':<10} {'scenario':<13} {'procs':>3} {'cycles':>6} "
        f"{'median ms':>10} {'p99 ms':>10} {'cycles/s':>9}"
    )
    with ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="hil-bench-")))
        stores = args.stores.split(",")
        pg = args.pg_url
        if "postgres" in stores and not pg:
            pg = stack.enter_context(private_cluster(fast=False))
        for store in stores:
            for scenario, procs in (("own", 1), ("own", 16), ("shared", 16)):
                if store == "sqlite":
                    url = str(tmp / f"{scenario}{procs}.db")
                else:
                    url = stack.enter_context(scratch_database(pg))
                open_store(url).close()  # create the schema outside the timing
                latencies, wall = run(url, scenario, procs, max(1, args.cycles // procs))
                report(store, f"{scenario} pairs", procs, latencies, wall)
    return 0


if __name__ == "__main__":
    sys.exit(benchmain.run("reservation", main))
