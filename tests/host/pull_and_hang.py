"""A run that reserves a pair, pulls its link and then hangs until it is killed.

``python pull_and_hang.py INVENTORY STORE LINK MODE TTL``: prints
``pulled LEASE`` once the pull is in place, then sleeps; the test kills it
with SIGKILL so that it never restores, as a crashed test run would not.
"""

from __future__ import annotations

import sys
import time

from hil.host.hosts import Hosts
from hil.host.journal import Journal
from hil.host.linkctl import LinkControl
from hil.inventory import load
from hil.reservation import Claim, Holder, open_store, reserve


def main(inventory: str, store_url: str, link: str, mode: str, ttl: str) -> None:
    inv = load(inventory)
    pair = inv.pair(link)
    store = open_store(store_url)
    claim = Claim(pair.name, (pair.host_a.name, pair.host_b.name))
    lease = reserve(store, [claim], Holder.current("pull_and_hang"), ttl=float(ttl))
    hosts = Hosts(inv, store)
    LinkControl(hosts, Journal(hosts, store, lease.id)).pull(link, mode)
    print("pulled", lease.id, flush=True)
    time.sleep(3600)


if __name__ == "__main__":
    main(*sys.argv[1:])
