"""A run that stops for good at a chosen point of a disruptive action, to be SIGKILLed there.

``python killed_run.py INVENTORY STORE TTL ACTION ARGS...`` reserves the pair of the
action, then does it through hil's own code with a journal that stops the run right after
an entry is recorded, before the change it guards is made: it prints ``journaled LEASE
ENTRY_ID WHAT`` and sleeps until killed.  With ``--after`` it stops after the action
instead (``done LEASE``).  Actions:

- ``pull LINK MODE``: ``LinkControl.pull`` (netns lab);
- ``setup PAIR N``: ``PairRun.set_up`` with RDMA, stopping at the N-th siw device
  creation's entry (the virtual lab: its ports fall back to siw; with N=2 the first
  host's device was made, the second's is journaled and not made).
"""

from __future__ import annotations

import sys
import time
from typing import Any

from hil.host.hosts import Hosts
from hil.host.journal import Journal
from hil.host.linkctl import LinkControl
from hil.inventory import load
from hil.reservation import Claim, Holder, open_store, reserve
from hil.run import PairRequest, PairRun


class StoppingJournal(Journal):
    """A journal that stops the run for good once the ``stop_nth`` entry whose ``what``
    contains ``stop_at`` is recorded (the change it guards is not made)."""

    stop_at = ""
    stop_nth = 1
    _seen = 0

    def change(self, host: str, undo: dict[str, Any]) -> int:
        entry_id = super().change(host, undo)
        if self.stop_at and self.stop_at in undo["what"]:
            StoppingJournal._seen += 1
            if StoppingJournal._seen == self.stop_nth:
                print("journaled", self.lease_id, entry_id, undo["what"], flush=True)
                time.sleep(3600)
        return entry_id


def pull(inventory: str, store_url: str, ttl: float, after: bool, link: str, mode: str) -> None:
    inv = load(inventory)
    pair = inv.pair(link)
    store = open_store(store_url)
    claim = Claim(pair.name, (pair.host_a.name, pair.host_b.name))
    lease = reserve(store, [claim], Holder.current("killed_run"), ttl=ttl)
    hosts = Hosts(inv, store)
    journal = StoppingJournal(hosts, store, lease.id)
    journal.stop_at = "" if after else link
    LinkControl(hosts, journal).pull(link, mode)
    print("done", lease.id, flush=True)


def setup(inventory: str, store_url: str, ttl: float, after: bool, pair: str, nth: str) -> None:
    import hil.host.journal

    StoppingJournal.stop_at = "" if after else "delete siw device"
    StoppingJournal.stop_nth = int(nth)
    # PairRun imports Journal from hil.host.journal when it opens the hosts: this run's
    # journal is then the stopping one (a hook of this helper, not of hil).
    hil.host.journal.Journal = StoppingJournal  # type: ignore[misc]
    run = PairRun(load(inventory), open_store(store_url), PairRequest(pair=pair, ttl=ttl))
    run.set_up()
    print("done", run.lease.id, flush=True)


def main(inventory: str, store_url: str, ttl: str, action: str, *args: str) -> None:
    after = "--after" in args
    args = tuple(a for a in args if a != "--after")
    {"pull": pull, "setup": setup}[action](inventory, store_url, float(ttl), after, *args)
    time.sleep(3600)


if __name__ == "__main__":
    main(*sys.argv[1:])
