"""The restore journal: every change a run makes on a host, and how to undo it.

A change is recorded *before* it is made, as a JSON-safe undo entry (data, not
a closure), in the reservation store under the lease and the affected host::

    journal.change("t6-a", agent_undo("set_link", "restore mtu 1500 on eth1",
                                      netdev="eth1", mtu=1500))
    hosts.call("t6-a", "set_link", netdev="eth1", mtu=9000)

At teardown ``Journal.close`` undoes the run's entries newest first; each
entry is removed once undone, a failing one is reported and kept, and the
rest still run.  A run that dies before teardown leaves its entries behind;
``replay`` (called right after reserving a pair) and ``hil host restore``
undo them.

Undo kinds (every entry also has ``what``, a sentence for people):

- ``agent``: ``method`` and ``params`` of an agent call on the entry's host
  (``run`` must exit 0); ``timeout``, when given, bounds the call and is the
  operation's own timeout (``wait_link``, ``run``).  ``method`` is a
  ``protocol.MethodName`` and ``params`` what the method declares
  (:mod:`hil.agent.protocol`): checked when the entry is made;
  replaying takes an entry as it was stored;
- ``ssh``: ``argv`` run over SSH on host ``on`` (a switch or PDU controller);
- any kind another package registers (:mod:`hil.host.extensions`), such as
  the virtual lab's ``qmp``: QEMU ``set_link`` on ``socket`` for ``netdev``.

Optional keys: ``then`` (entries run after this one succeeded, e.g. a wait
for carrier), ``missing_ok`` (an agent error saying the thing is already gone
counts as undone) and any tags a caller wants to find entries by (``link``).

What an entry is, its kinds and how one is carried out: :mod:`hil.host.undo`
(this module still names ``agent_undo``, ``ssh_undo`` and
``register_undo_kind``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from hil.errors import HilError, RemoteError
from hil.host.undo import agent_undo as agent_undo
from hil.host.undo import apply_undo, check_entry
from hil.host.undo import register_undo_kind as register_undo_kind
from hil.host.undo import ssh_undo as ssh_undo

if TYPE_CHECKING:
    from hil.host.hosts import Hosts
    from hil.inventory.model import Pair
    from hil.reservation.model import JournalEntry
    from hil.reservation.store import Store

log = logging.getLogger(__name__)

UNDO_TIMEOUT = 30.0


@dataclass(frozen=True)
class UndoFailure:
    """An undo that failed: its host, entry id, what it meant to do and why."""

    host: str
    entry_id: int
    what: str
    error: str

    def __str__(self) -> str:
        return f"{self.host}: {self.what} (journal entry {self.entry_id}) failed: {self.error}"


@dataclass(frozen=True)
class UndoReport:
    """What a round of undos did: the ``what`` of each done, and the failures."""

    undone: tuple[str, ...] = ()
    failed: tuple[UndoFailure, ...] = ()

    def check(self, context: str) -> None:
        """Raise ``RemoteError`` listing every failure, if there was any."""
        if self.failed:
            host = self.failed[0].host
            lines = "; ".join(str(f) for f in self.failed)
            raise RemoteError(
                host,
                f"{context}: {len(self.failed)} undo(s) failed and stay in the journal "
                f"(fix the host, then run `hil host restore {host}`): {lines}",
            )


def _undo_entries(
    hosts: Hosts, store: Store, entries: Iterable[JournalEntry], timeout: float
) -> UndoReport:
    """Undo ``entries`` newest first, removing each one undone."""
    undone: list[str] = []
    failed: list[UndoFailure] = []
    for e in sorted(entries, key=lambda x: x.id, reverse=True):
        what = str(e.entry.get("what", e.entry))
        try:
            apply_undo(hosts, e.host, e.entry, timeout)
        except HilError as err:
            log.warning("%s: undo %r failed: %s", e.host, what, err)
            failed.append(UndoFailure(e.host, e.id, what, str(err)))
            continue
        store.journal_remove(e.id)
        log.info("%s: undone: %s", e.host, what)
        undone.append(f"{e.host}: {what}")
    return UndoReport(tuple(undone), tuple(failed))


class Journal:
    """The restore journal of one run, under lease ``lease_id``.

    ``change`` records an undo entry; ``undo`` undoes some of this run's
    entries (a link restore); ``close`` undoes all that remain (teardown).

    With the lease's fencing ``token`` the journal is fenced: ``change``
    records an entry only while the run still holds its lease, checked in
    the same store transaction, and ``undo`` checks it first, so a run that
    lost its lease (paused past its TTL, the pair taken over) changes and
    restores nothing on the new holder's hosts: it gets ``LeaseLost`` naming
    the new holder, and the new holder's replay undoes what it left.
    Without a token (``hil host restore``, tests) nothing is fenced.
    """

    def __init__(
        self,
        hosts: Hosts,
        store: Store,
        lease_id: str,
        timeout: float = UNDO_TIMEOUT,
        *,
        token: int | None = None,
    ) -> None:
        self.hosts = hosts
        self.store = store
        self.lease_id = lease_id
        self.timeout = timeout
        self.token = token
        self._ids: dict[int, str] = {}  # entry id -> host, for this run's entries

    def fence(self) -> None:
        """Raise ``LeaseLost`` unless the run still holds its lease (a fenced journal only);
        call it immediately before a disruptive action that is not journaled (a power cycle)."""
        if self.token is not None:
            self.store.fence(self.lease_id, self.token)

    def change(self, host: str, undo: dict[str, Any]) -> int:
        """Record ``undo`` for a change about to be made on ``host``; returns the entry id.

        A fenced journal records it in the transaction that checks the lease
        (``LeaseLost``, nothing recorded, when the run no longer holds it).
        """
        check_entry(undo)
        self.hosts.host(host)
        if self.token is None:
            entry_id = self.store.journal_add(host, self.lease_id, undo)
        else:
            entry_id = self.store.journal_add(host, self.lease_id, undo, token=self.token)
        self._ids[entry_id] = host
        log.debug("%s: journaled (%d): %s", host, entry_id, undo["what"])
        return entry_id

    def forget(self, entry_id: int) -> None:
        """Drop an entry without undoing it (the change it guarded did not happen)."""
        self.store.journal_remove(entry_id)
        self._ids.pop(entry_id, None)

    def find(self, hosts: Iterable[str], **tags: Any) -> list[JournalEntry]:
        """Entries on ``hosts`` (of any lease) whose keys match ``tags``, oldest first."""
        found = [
            e
            for h in dict.fromkeys(hosts)
            for e in self.store.journal_entries(h)
            if all(e.entry.get(k) == v for k, v in tags.items())
        ]
        return sorted(found, key=lambda e: e.id)

    def undo(self, entries: Iterable[JournalEntry]) -> UndoReport:
        """Undo ``entries`` newest first; each one undone leaves the journal.

        A fenced journal checks the lease first: ``LeaseLost`` undoes nothing.
        """
        entries = list(entries)
        if not entries:
            return UndoReport()
        self.fence()
        report = _undo_entries(self.hosts, self.store, entries, self.timeout)
        failed = {f.entry_id for f in report.failed}
        for e in entries:
            if e.id not in failed:
                self._ids.pop(e.id, None)
        return report

    def close(self) -> UndoReport:
        """Teardown: undo every entry this run recorded that is still journaled."""
        hosts = set(self._ids.values())
        mine = [e for e in self.find(hosts) if e.id in self._ids]
        return self.undo(mine)


def replay(
    hosts: Hosts, pair: Pair, store: Store | None = None, timeout: float = UNDO_TIMEOUT
) -> UndoReport:
    """Undo what dead runs left in the journals of ``pair``'s hosts, newest first.

    Call right after reserving the pair (the reservation makes the hosts
    ours, so every entry left on them belongs to a run that is gone).
    """
    store = _store(hosts, store)
    entries = [e for h in pair.hosts for e in store.journal_entries(h.name)]
    entries += _middlebox_entries(store, pair)
    if entries:
        log.info("pair %s: replaying %d journal entries left behind", pair.name, len(entries))
    return _undo_entries(hosts, store, entries, timeout)


def _middlebox_entries(store: Store, pair: Pair) -> list[JournalEntry]:
    """What dead runs left on ``pair``'s middlebox for its link (netem, offloads turned off:
    hil.host.impair tags each with the link).  The middlebox is not the pair's own, and
    may bridge other pairs' links: only this link's entries are ours to undo."""
    host, link = pair.link.impair.host, pair.link.name
    if pair.link.impair.mode != "middlebox" or host is None:
        return []
    return [
        e
        for e in store.journal_entries(host)
        if link in (e.entry.get("impair"), e.entry.get("offloads"))
    ]


def restore_host(
    hosts: Hosts, name: str, store: Store | None = None, timeout: float = UNDO_TIMEOUT
) -> UndoReport:
    """Undo every journal entry of host ``name``, newest first (``hil host restore``)."""
    hosts.host(name)
    store = _store(hosts, store)
    return _undo_entries(hosts, store, store.journal_entries(name), timeout)


def _store(hosts: Hosts, store: Store | None) -> Store:
    store = store or hosts.store
    if store is None:
        raise TypeError("the restore journal needs a reservation store (Hosts(store=...))")
    return store
