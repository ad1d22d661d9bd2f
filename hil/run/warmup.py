"""A pair's hosts made ready for a run: their agents warm, what dead runs left undone.

The first stage after :meth:`~hil.run.pairrun.PairRun.open_hosts` opened the
hosts: one agent call per host in parallel (each host's agent started and its
slow first import paid), then, unless the run adopted its lease (its holder's
changes are its own), the restore journal that dead runs left on the pair's
hosts replayed.  A host lost meanwhile, or an undo that fails, is noted in
the host's health (docs/reliability.md).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hil.host.hosts import Hosts
    from hil.inventory.model import Pair
    from hil.reservation.store import Store

# A freshly booted TCG guest under load took over 30 s (the agent's call
# bound) for the agent's first netlink call, which waits for pyroute2's import.
WARMUP_TIMEOUT = 180.0


def warm_up(hosts: Hosts, store: Store, pair: Pair, *, replay_journal: bool) -> None:
    """Warm the agents of ``pair``'s hosts in parallel, then (``replay_journal``) undo what
    dead runs left journaled there; raises when an undo failed."""
    from hil.host.healthcheck import failures_noted, note_undo_failures
    from hil.host.journal import replay

    names = [h.name for h in pair.hosts]
    with failures_noted(store), ThreadPoolExecutor(max_workers=len(names)) as pool:
        list(pool.map(lambda n: hosts.call(n, "links", timeout=WARMUP_TIMEOUT), names))
    if replay_journal:
        replayed = replay(hosts, pair)
        note_undo_failures(store, replayed)  # host health: restore failed
        replayed.check(f"replaying the journal of pair {pair.name}")
