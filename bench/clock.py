"""How well hil knows the clocks of a pair: over SSH, and host to host over the data link.

    .venv/bin/python bench/clock.py --inventory "$(hil lab inventory)" \\
        --store /tmp/hil-bench-clock.db [--ssh-rounds 300] [--probes 64] [--repeat 10]

On one pair, in one run, prints:

- SSH (``cm_now`` round trips, per host): the round trips' min, p10, median
  and max, and the uncertainty of the offset estimate from the first 7 and 40
  rounds and from all of them (the rounds' windows intersected,
  ``hil.cm.clock.estimate``); for comparison, the same round trip to an agent
  on this machine over a pipe (no SSH, no guest): what the agent's own
  request handling costs;
- host to host (``clock_probe``/``clock_echo``, UDP over the data link):
  ``--repeat`` measurements of ``--probes`` probes each, the probes' round
  trips (min, median), each measurement's uncertainty and offset, and how
  the relative offset agrees with the two SSH offsets' difference (it must lie
  within their summed uncertainty);
- the wall time of one ``PairSides.refresh_offsets`` (what each recording pays), next
  to 7 SSH round trips per host (what it paid before the probes).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import benchmain  # bench/, beside this script

from hil.agent import Agent
from hil.cm import clock
from hil.inventory import loader
from hil.reservation import open_store
from hil.run import PairRequest, PairRun


def _rtts(windows: list[tuple[int, int]]) -> str:
    rtt = sorted(hi - lo for lo, hi in windows)
    return (
        f"rtt min {rtt[0] / 1e3:.2f} p10 {rtt[len(rtt) // 10] / 1e3:.2f} "
        f"median {statistics.median(rtt) / 1e3:.2f} max {rtt[-1] / 1e3:.2f} ms"
    )


def _ssh(host: str, agent: Agent, rounds: int) -> clock.Bounds:
    windows = clock.ssh_windows(clock.agent_now(agent), rounds)
    picks = {n: clock.intersect(windows[:n]) for n in (7, 40, rounds) if n <= rounds}
    unc = ", ".join(f"{n} rounds +/- {b.half_width / 1e3:.3f} ms" for n, b in picks.items())
    print(f"ssh {host:<12} {len(windows)} round trips: {_rtts(windows)}; offset {unc}")
    return picks[rounds]


def _local(rounds: int) -> None:
    with Agent.local(name="controller") as agent:
        windows = clock.ssh_windows(clock.agent_now(agent), rounds)
    print(f"local agent (pipe, no SSH) {rounds} round trips: {_rtts(windows)}")


def main() -> int:
    """Reserve and set up the pair, measure, print."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--inventory", required=True)
    p.add_argument("--store", required=True)
    p.add_argument("--pair", help="pair name (default: the inventory's first)")
    p.add_argument("--ssh-rounds", type=int, default=300)
    p.add_argument("--probes", type=int, default=clock.DEFAULT_PROBES)
    p.add_argument("--repeat", type=int, default=10)
    p.add_argument("--wait", type=float, default=0.0, help="queue for the pair up to S seconds")
    args = p.parse_args()
    inv = loader.load(args.inventory)
    request = PairRequest(
        pair=args.pair or inv.pairs()[0].name, holder="bench/clock.py", ttl=900, wait=args.wait
    )
    _local(args.ssh_rounds)
    with open_store(args.store) as store, PairRun(inv, store, request) as run:
        s = run.session(evidence=False)
        ssh = {side: _ssh(s.host(side), s.agent(side), args.ssh_rounds) for side in "ab"}
        a, b = (clock.Peer(s.host(x), s.agent(x), s.address(x)) for x in "ab")
        offsets, uncs, rtts = [], [], []
        for _ in range(args.repeat):
            samples = clock.probe_samples(a, b, s.port(), args.probes)
            rc = clock.relative(a.host, b.host, samples)
            offsets.append(rc.offset_us)
            uncs.append(rc.uncertainty_us)
            rtts += [hi - lo for lo, hi in clock.probe_windows(samples)]
        # a = b + rel, and controller = host + offset: rel = offset_b - offset_a.
        via_ssh = ssh["b"].middle - ssh["a"].middle
        slack = ssh["a"].half_width + ssh["b"].half_width
        print(
            f"host to host {a.host} - {b.host}, {args.repeat} x {args.probes} probes: "
            f"rtt min {min(rtts) / 1e3:.3f} median {statistics.median(rtts) / 1e3:.3f} ms; "
            f"uncertainty median {statistics.median(uncs)} max {max(uncs)} us; offsets "
            f"{min(offsets)}..{max(offsets)} us"
        )
        print(
            f"agreement: ssh says {via_ssh} +/- {slack} us, probes {statistics.median(offsets)} us "
            f"({'within' if abs(via_ssh - statistics.median(offsets)) <= slack else 'OUTSIDE'})"
        )
        took, ssh_only = [], []
        for _ in range(5):
            start = time.perf_counter()
            s.refresh_offsets()
            took.append((time.perf_counter() - start) * 1000)
            start = time.perf_counter()
            for x in "ab":  # what a recording paid before the probes: 7 rounds per host
                clock.estimate(s.host(x), clock.agent_now(s.agent(x)), clock.DEFAULT_ROUNDS)
            ssh_only.append((time.perf_counter() - start) * 1000)
        print(
            f"refresh_offsets (7 ssh rounds to A while {clock.DEFAULT_PROBES} probes run): "
            f"median {statistics.median(took):.0f} ms, max {max(took):.0f} ms; before "
            f"(7 ssh rounds per host): median {statistics.median(ssh_only):.0f} ms, max "
            f"{max(ssh_only):.0f} ms; clocks {s.clocks()}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(benchmain.run("clock", main))
