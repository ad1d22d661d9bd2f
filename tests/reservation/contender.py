"""A reserver process for the contention and kill tests (run as a script).

``cycle``: reserve and release ``--cycles`` times, queueing for the pairs,
and write each hold interval (``time.monotonic``, system-wide) as a JSON
line to ``--out``.  ``hold``: reserve once, print the lease as JSON, renew
with a heartbeat until killed; exit 3 printing the error if it is lost
(with ``--attempt TEST``, an attempt marker for TEST is begun first and its
id printed as the JSON's ``attempt``).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import threading
import time

from hil.reservation import Claim, Heartbeat, Holder, open_store, reserve


def _claims(text: str) -> list[Claim]:
    return [Claim(pair, (a, b)) for pair, a, b in json.loads(text)]


def cycle(args: argparse.Namespace) -> int:
    """Reserve, hold briefly, release; record every hold."""
    rng = random.Random(args.seed)
    claims = _claims(args.claims)
    holder = Holder.current(note=f"contender {args.seed}")
    records = []
    with open_store(args.store, timeout=30) as store:
        for _ in range(args.cycles):
            lease = reserve(
                store,
                claims,
                holder,
                ttl=args.ttl,
                wait=60,
                poll=args.poll,
                ticket_ttl=args.ticket_ttl,
            )
            start = time.monotonic()
            time.sleep(rng.uniform(0, 0.003))
            end = time.monotonic()
            store.release(lease.id)
            records.append(
                {
                    "lease": lease.id,
                    "pair": lease.pair,
                    "hosts": list(lease.hosts),
                    "start": start,
                    "end": end,
                    "worker": args.seed,
                }
            )
    with open(args.out, "w") as out:
        out.writelines(json.dumps(r) + "\n" for r in records)
    return 0


def hold(args: argparse.Namespace) -> int:
    """Hold a pair with a heartbeat until killed."""
    lost = threading.Event()
    with open_store(args.store) as store:
        lease = reserve(store, _claims(args.claims), Holder.current(note="holder"), ttl=args.ttl)
        shown = lease.to_json()
        if args.attempt:
            shown["attempt"] = store.begin_attempt(args.attempt, lease.pair, lease.hosts, lease.id)
        print(json.dumps(shown), flush=True)
        with Heartbeat(store, lease, on_lost=lambda _: lost.set()) as beat:
            lost.wait()
        print(f"LOST: {beat.lost}", flush=True)
    return 3


def main() -> int:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="mode", required=True)
    c = sub.add_parser("cycle")
    c.add_argument("--store", required=True)
    c.add_argument("--claims", required=True)
    c.add_argument("--cycles", type=int, required=True)
    c.add_argument("--seed", type=int, required=True)
    c.add_argument("--poll", type=float, default=0.05)
    c.add_argument("--ttl", type=float, default=60)
    c.add_argument("--ticket-ttl", type=float)
    c.add_argument("--out", required=True)
    c.set_defaults(func=cycle)
    h = sub.add_parser("hold")
    h.add_argument("--store", required=True)
    h.add_argument("--claims", required=True)
    h.add_argument("--ttl", type=float, required=True)
    h.add_argument("--attempt")
    h.set_defaults(func=hold)
    args = parser.parse_args()
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
