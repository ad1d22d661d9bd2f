"""Every race sweep at its full budget on one pair, one after the other: the rounds per
order, the contract's verdict and what each sweep cost.

    .venv/bin/python bench/races.py --inventory /tmp/hil-lab-h2/inventory.yaml \\
        --store /tmp/hil-lab-h2/store.db [--race disconnects ...] [--direction b-a]

Reserves the pair and sets it up (``hil.run.PairRun``), then runs each race's
full sweep (``RACES[name].full``: no early stop) asking for all its orders,
and prints per race the rounds, the count of each order, the seconds it took
and "race window not reached" or the contract's violations.  Exit 1 when a
sweep missed an order or broke the contract (the nightly's check), else 0.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import benchmain  # bench/, beside this script

from hil.cm.races import RACES
from hil.inventory import loader
from hil.judge.contract import check
from hil.reservation import open_store
from hil.run import PairRequest, PairRun


def main() -> int:
    """Parse arguments, reserve and set up the pair, sweep each race, print the table."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--inventory", required=True)
    p.add_argument("--store", required=True)
    p.add_argument("--pair", help="pair name (default: the inventory's first)")
    p.add_argument("--race", action="append", choices=sorted(RACES.names()), help="default: all")
    p.add_argument("--direction", choices=("a-b", "b-a"), default="a-b")
    p.add_argument("--wait", type=float, default=0.0, help="queue for the pair up to S seconds")
    args = p.parse_args()
    inv = loader.load(args.inventory)
    request = PairRequest(
        pair=args.pair or inv.pairs()[0].name, holder="bench/races.py", ttl=3600, wait=args.wait
    )
    failed = 0
    with open_store(args.store) as store, PairRun(inv, store, request) as run:
        s = run.session(args.direction, evidence=False)
        for name in args.race or sorted(RACES.names()):
            race = RACES[name]
            began = time.monotonic()
            sweep = race.sweep(s, race.full, race.orders)
            took = time.monotonic() - began
            verdict = check(sweep.timeline, s.profile)
            missed = sweep.not_reached()
            lines = [f"{name} ({args.direction}, {race.full.describe()}): {took:.0f} s"]
            lines.append(f"  {sweep.summary()}")
            if missed:
                lines.append(f"  {missed}")
            if not verdict.ok:
                lines.append("  " + verdict.to_text().replace("\n", "\n  "))
            print("\n".join(lines), flush=True)  # each race as it ends: a long run may be cut
            failed += bool(missed) or not verdict.ok
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(benchmain.run("races", main))
