"""Fault campaign: the reservation store fails under a run holding a pair (netns lab).

- The store's disk full: a SQLite store on a small tmpfs of its own, filled while a run
  holds a lease and a journaled link pull.
- PostgreSQL restarted in the middle of a run with leases held: a private server of the
  test's own (tests/reservation's is shared by its tests), restarted while a run holds a
  lease, its heartbeat renewing it, and a pull journaled.

Each checks what the run reports (a StoreError naming the store and what to do), that no
change is made on a host whose undo could not be recorded, and what the next run finds:
the lease and every journal entry, which it replays.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from faultlab import mtu, wait_for
from netnslab import NetnsLab

from hil.errors import BusyError, StoreError
from hil.host.hosts import Hosts
from hil.host.journal import Journal, agent_undo, replay
from hil.host.linkctl import LinkControl
from hil.reservation import Claim, Heartbeat, Holder, Store, open_store, reserve
from hil.reservation.pgcluster import find_bindir, private_cluster

LINK = "ns0-ns1"


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 2 MiB tmpfs of the test's own, unmounted at the end."""
    mount = tmp_path / "disk"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "hil-fault", str(mount)], check=True)
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=True)


def _fill(disk: Path) -> Path:
    """Fill ``disk`` to the last byte; returns the filler file."""
    filler = disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        while True:
            os.write(fd, b"\0" * 4096)
    except OSError:
        pass
    finally:
        os.close(fd)
    return filler


def _claim(lab: NetnsLab) -> Claim:
    pair = lab.inventory().pair(LINK)
    return Claim(pair.name, (pair.host_a.name, pair.host_b.name))


@pytest.fixture
def lab(netns_lab: NetnsLab) -> Iterator[NetnsLab]:
    """The session's netns lab; what a failing test may have left is put back by hand."""
    yield netns_lab
    netns_lab.exec(0, ["ip", "link", "set", "dev", "data0", "up"], check=False)
    netns_lab.exec(1, ["ip", "link", "set", "dev", "data0", "mtu", "1500"], check=False)


def test_a_full_disk_refuses_changes_it_cannot_journal_and_loses_nothing(
    lab: NetnsLab, small_disk: Path
) -> None:
    path = small_disk / "store.db"
    inventory = lab.inventory()
    store = open_store(str(path))
    lease = reserve(store, [_claim(lab)], Holder.current("disk-full run"), ttl=60)
    hosts = Hosts(inventory, store)
    ctl = LinkControl(hosts, Journal(hosts, store, lease.id))
    ctl.pull(LINK, "admin")  # journaled and made before the disk fills
    filler = _fill(small_disk)
    try:
        # What the run reports: the store's error, naming the file; nothing else changes.
        with pytest.raises(StoreError) as e:
            _change_mtu(hosts, ctl.journal)
        message = str(e.value)
        assert message.startswith(f"reservation store {path}: "), message
        assert f"the file system of {path} is full; free space there" in message, message
        assert mtu(lab, 1, "data0") == 1500, "a change was made whose undo was not journaled"
        with pytest.raises(StoreError):
            store.renew(lease.id)
        # Another run is still told who holds the pair (a read needs no space).
        with pytest.raises(BusyError, match=r"is held by .* \(disk-full run\)"):
            reserve(store, [_claim(lab)], Holder.current("another"), ttl=60)
        entries = [e.entry["what"] for e in store.journal_entries("ns0")]
        assert entries == ["set data0 up (link ns0-ns1)"], entries
        # The run's restore: the host is put back, but the entry cannot leave the journal,
        # and the run is told so; the next run undoes it again (a harmless repeat).
        with pytest.raises(StoreError, match="database or disk is full"):
            ctl.restore(LINK)
        assert _end_up(ctl), "the restore did not put the host back"
        assert [e.entry["what"] for e in store.journal_entries("ns0")] == entries
    finally:
        hosts.close()
        store.close()
        filler.unlink()
    # The next run: the store is whole, the dead run's lease and entry are there.
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    with open_store(str(path)) as store:
        assert [x.id for x in store.leases()] == [lease.id]
        store.release(lease.id)  # as if it had expired: the next reservation takes it over
        taken = reserve(store, [_claim(lab)], Holder.current("next run"), ttl=60)
        with Hosts(inventory, store) as hosts:
            report = replay(hosts, inventory.pair(LINK))
            assert report.undone == ("ns0: set data0 up (link ns0-ns1)",), report
            state = LinkControl(hosts, Journal(hosts, store, taken.id)).state(LINK)
        assert (state.a.up, state.a.carrier, state.pulled) == (True, True, ())
        store.release(taken.id)


def _end_up(ctl: LinkControl) -> bool:
    a = ctl.state(LINK).a
    return a.up and a.carrier


def _change_mtu(hosts: Hosts, journal: Journal) -> None:
    """A disruptive change as hil makes every one: its undo journaled first."""
    undo = agent_undo("set_link", "restore mtu 1500 on data0", netdev="data0", mtu=1500)
    journal.change("ns1", undo)
    hosts.agent("ns1").set_link("data0", mtu=1400)


@pytest.fixture(scope="module")
def pg() -> Iterator[tuple[str, list[str]]]:
    """A private PostgreSQL server: its URL, and the pg_ctl command that controls it."""
    with private_cluster() as url:
        with psycopg.connect(url, autocommit=True) as conn:
            row = conn.execute("SHOW data_directory").fetchone()
        assert row is not None
        as_postgres = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        yield url, [*as_postgres, str(find_bindir() / "pg_ctl"), "-D", str(row[0])]


def _pg_ctl(pg_ctl: list[str], *args: str) -> None:
    log = str(Path(pg_ctl[-1]).parent / "log")  # the server's own log file, not our pipes
    subprocess.run([*pg_ctl, "-l", log, *args], check=True, capture_output=True, timeout=60)


def _first_query_after(store: Store, host: str) -> tuple[list[str], list[str]]:
    """The run's next store call after the server came back, tried twice: the errors
    seen (none: a connection that broke while idle is replaced before the call runs),
    and the entries of ``host``."""
    errors: list[str] = []
    for _ in range(2):
        try:
            return errors, [e.entry["what"] for e in store.journal_entries(host)]
        except StoreError as e:
            errors.append(str(e))
    raise AssertionError(f"the store did not come back: {errors}")


@pytest.mark.postgres
def test_postgres_restarted_under_a_run_keeps_its_lease_and_journal(
    lab: NetnsLab, pg: tuple[str, list[str]]
) -> None:
    url, pg_ctl = pg
    store = open_store(url)
    lease = reserve(store, [_claim(lab)], Holder.current("pg run"), ttl=6)
    hosts = Hosts(lab.inventory(), store)
    ctl = LinkControl(hosts, Journal(hosts, store, lease.id))
    try:
        with Heartbeat(url, lease, interval=0.5) as beat:
            ctl.pull(LINK, "admin")
            _pg_ctl(pg_ctl, "-m", "fast", "-w", "-t", "30", "restart")
            back = time.time()
            # The run's own connection: its old session was ended while idle, so the next
            # call reconnects before it runs anything (the heartbeat's the same).
            errors, entries = _first_query_after(store, "ns0")
            assert errors == []
            assert entries == ["set data0 up (link ns0-ns1)"]
            assert wait_for(lambda: beat.lease.expires.timestamp() > back + 5, timeout=5), (
                "the heartbeat did not renew the lease after the restart"
            )
            assert beat.lost is None
            assert ctl.restore(LINK).undone == ("ns0: set data0 up (link ns0-ns1)",)
        assert [x.id for x in store.leases()] == [lease.id]
    finally:
        hosts.close()
        store.release(lease.id)
        store.close()


@pytest.mark.postgres
def test_postgres_down_past_the_ttl_loses_the_lease_but_not_the_journal(
    lab: NetnsLab, pg: tuple[str, list[str]]
) -> None:
    url, pg_ctl = pg
    inventory = lab.inventory()
    ttl = 2.0
    store = open_store(url)
    lease = reserve(store, [_claim(lab)], Holder.current("pg run"), ttl=ttl)
    hosts = Hosts(inventory, store)
    lost: list[str] = []
    try:
        with Heartbeat(url, lease, on_lost=lambda e: lost.append(str(e)), interval=0.3):
            LinkControl(hosts, Journal(hosts, store, lease.id)).pull(LINK, "admin")
            _pg_ctl(pg_ctl, "-m", "immediate", "-w", "-t", "30", "stop")  # as if it crashed
            try:
                # What the run is told: the lease is lost, and what to do.
                assert wait_for(lambda: lost != [], timeout=ttl + 5), "no LeaseLost"
            finally:
                _pg_ctl(pg_ctl, "-w", "-t", "30", "start")
        assert lost[0].startswith(
            f"could not renew lease {lease.id} on pair {LINK} before it expired"
        ), lost
        assert "stop using them and reserve again" in lost[0]
    finally:
        hosts.close()
        store.close()
    # The next run: the entry survived the crash; it takes the expired lease over, replays.
    with open_store(url) as store:
        assert [e.lease_id for e in store.journal_entries("ns0")] == [lease.id]
        taken = reserve(store, [_claim(lab)], Holder.current("next run"), ttl=30)
        assert [x.id for x in store.leases()] == [taken.id]
        with Hosts(inventory, store) as hosts:
            report = replay(hosts, inventory.pair(LINK))
        assert report.undone == ("ns0: set data0 up (link ns0-ns1)",), report
        assert store.journal_entries("ns0") == []
        store.release(taken.id)
