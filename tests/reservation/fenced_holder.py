"""A run that holds the netns lab's pair through PairRun and pulls its link when told.

``python fenced_holder.py INVENTORY STORE TTL``: reserves pair ns0-ns1 with a
TTL of TTL seconds (renewed by PairRun's heartbeat), opens its hosts and
prints ``ready LEASE TOKEN``.  Then, for each line on stdin: ``pull`` pulls
link ns0-ns1 (admin) and prints ``pulled`` or ``refused KIND: MESSAGE``;
``fence`` calls ``PairRun.fence`` (what a power cycle calls first) and prints
``fenced`` or the same refusal;
``close`` closes the run, prints ``closed`` or ``close failed KIND: MESSAGE``
and exits.  The fencing test SIGSTOPs it between ``ready`` and ``pull``.
"""

from __future__ import annotations

import sys

from hil.errors import HilError
from hil.host.linkctl import LinkControl
from hil.inventory import load
from hil.reservation import open_store
from hil.run import PairRequest, PairRun

LINK = "ns0-ns1"


def main(inventory: str, store_url: str, ttl: str) -> None:
    request = PairRequest(pair=LINK, holder="fenced holder", ttl=float(ttl), rdma=False)
    with open_store(store_url) as store:
        run = PairRun(load(inventory), store, request)
        run.open_hosts()
        print("ready", run.lease.id, run.lease.token, flush=True)
        actions = {
            "pull": lambda: LinkControl(run.hosts, run.journal).pull(LINK, "admin"),
            "fence": run.fence,
        }
        done = {"pull": "pulled", "fence": "fenced"}
        for line in sys.stdin:
            if line.strip() in actions:
                try:
                    actions[line.strip()]()
                    print(done[line.strip()], flush=True)
                except HilError as e:
                    print(f"refused {type(e).__name__}: {e}", flush=True)
            elif line.strip() == "close":
                try:
                    run.close()
                    print("closed", flush=True)
                except HilError as e:
                    print(f"close failed {type(e).__name__}: {e}", flush=True)
                return


if __name__ == "__main__":
    main(*sys.argv[1:])
