"""Device removal: the netdev under a siw device goes while the device is in use.

- ``regress_siw_netdev_removed`` was written for "RDMA/siw: Remove direct link to
  net_device" (Bernard Metzler, December 2024, syzbot 4b87489410b4efd181bf: KASAN
  slab-use-after-free in siw_query_port / dev_get_flags), but its port queries cannot
  reach that bug (docs/notes/regression-corpus.md): suites/test_device_removal.py runs
  it as what it shows, a removal that waits for the device's users;
  :mod:`.portquery` guards the fix.  Its helpers (:func:`make_device`,
  :func:`wait_listed`, :func:`wait_gone`) serve both.

On the active host: a veth with a siw device on it, a cm_id bound and
listening on its address, port queries running (``rdma link show``: each
one queries every port), and a connection on the pair's own device; then
the veth is deleted.  The device must go, the queries must have run across
the removal, and the pair's connection must not notice.  The unregistration
waits for everything that uses the device: the bound id, and the verbs
context librdmacm opened for it, which siw cannot disassociate (no
``disassociate_ucontext``), so ``ip link del`` blocks until the id's process
exits; DEVICE_REMOVAL did not reach it first (seen on the lab: none in 3 s
before the exit, the delete returned 0.15 s after it).  The case holds the
device 1 s, then kills that process, and asks that the removal waited for
it.  Everything made is journaled before it is made.

The order is driven by what the hosts show, not by delays (:func:`bind`), so
that a slow guest cannot reorder it: the listen comes once a query has
listed the device; a listen refused with ENODEV (the CM did not take the
device as the address's yet: seen once on a debug guest beside CI) is tried
again until the id is bound, within :data:`LISTED_S` (the veth's MACs are set as it
is made, :data:`MACS`: a MAC udev changed later refused every listen); the removal begins
only once the id is bound and a query that began after the bind has ended.
An id never bound means no removal: "id bound to the device" not reached.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING

from hil import tools
from hil.cm import steps
from hil.cm.clock import controller_us
from hil.cm.registry import sequence
from hil.cm.regressions.evidence import note, window
from hil.errors import InputError
from hil.host.journal import agent_undo
from hil.judge.timeline import Action, Timeline

if TYPE_CHECKING:
    from hil.agent.agent import Agent
    from hil.cm.endpoint import Endpoint, Outcome
    from hil.cm.recording import Recording
    from hil.cm.sides import PairSides
    from hil.host.journal import Journal

NETDEV, PEER, DEVICE = "hilrg0", "hilrg1", "hilrgsiw0"
ADDRESS = "198.19.255.1"  # benchmarking range, on a veth that leaves no host
# Set as the veth is made: siw takes its GID from the netdev's MAC when the device
# registers and, on a later MAC change, raises LID_CHANGE, which does not refresh the
# GID cache; rdma_bind_addr then finds no device for the address (ENODEV) for good.  A
# guest's udev replaced a new veth's random MAC (MACAddressPolicy=persistent) after the
# siw device was made, on a slow debug guest: the listen was refused 38 times over 30 s.
MACS = ("02:68:69:6c:72:30", "02:68:69:6c:72:31")  # locally administered, unicast
PREFIX = 30
GONE_S = 10.0  # the device goes (a queued unregistration) within this once nothing holds it
HOLD_S = 1.0  # how long the bound id's process keeps the device before it lets go
# A query listing the device, the id bound, a query after the bind: one query takes over
# 0.3 s on a debug guest, a worker's first listen seconds.
LISTED_S = 30.0
RETRY_S = 0.5  # between listens refused with ENODEV
SYSFS_S = 10.0  # a sysfs read on the host


class Queries:
    """``rdma link show`` (a port query of every device) over and over in a thread; the
    controller time each query began and ended, and whether it listed the device."""

    def __init__(self, agent: Agent) -> None:
        self.agent = agent
        self.done: list[tuple[int, int, bool]] = []
        self.failed: list[str] = []
        self._stop = threading.Event()
        self._listed = threading.Event()
        self._ended = threading.Condition()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> Queries:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(30)

    def _loop(self) -> None:
        while not self._stop.is_set():
            start = controller_us()
            try:
                listed = any(p.device == DEVICE for p in self.agent.rdma_links(timeout=10))
            except Exception as e:  # noqa: BLE001 -- a failed query is evidence, kept and shown
                self.failed.append(f"{type(e).__name__}: {e}")
                listed = False
            with self._ended:
                self.done.append((start, controller_us(), listed))
                self._ended.notify_all()
            if listed:
                self._listed.set()

    def wait_listed(self, timeout: float) -> bool:
        """Wait until a query has listed the device; False when none had in ``timeout``."""
        return self._listed.wait(timeout)

    def wait_begun_after(self, t_us: int, timeout: float) -> bool:
        """Wait until a query that began after ``t_us`` has ended; False after ``timeout``."""
        with self._ended:
            return self._ended.wait_for(
                lambda: any(start > t_us for start, *_ in self.done), timeout
            )

    def across(self, t_us: int) -> bool:
        """True when a query began before ``t_us`` and ended after it."""
        return any(start < t_us < end for start, end, _ in self.done)


@dataclass(frozen=True)
class Bound:
    """The listen that was to bind an id to the device: the last one tried, and how many."""

    listen: Outcome
    tries: int

    @property
    def ok(self) -> bool:
        """True when the id is bound (its listen succeeded)."""
        return self.listen.ok


def bind(
    listen: Callable[[], Outcome],
    queries: Queries,
    timeout: float,
    sleep: Callable[[float], None] = time.sleep,
) -> Bound:
    """Bind an id to the device, in the order the removal needs, whatever the host's speed.

    Once a query has listed the device: ``listen`` until one succeeds (one refused with
    ENODEV is tried again, :data:`RETRY_S` apart; any other error ends it), then wait for
    a query that began after the bind to end.  Within ``timeout`` in all; the removal may
    begin only when the result is ok.
    """
    deadline = time.monotonic() + timeout
    queries.wait_listed(timeout)  # else "queries saw the device" is not reached
    tries = 0
    while True:
        got, tries = listen(), tries + 1
        if got.ok or got.action.result != "ENODEV" or time.monotonic() + RETRY_S > deadline:
            break
        sleep(RETRY_S)
    if got.ok:
        queries.wait_begun_after(got.action.t_us, max(0.0, deadline - time.monotonic()))
    return Bound(got, tries)


def gid_evidence(agent: Agent) -> dict[str, float]:
    """Whether the device's GID 0 is set and is its netdev's MAC, as sysfs shows them.

    rdma_bind_addr takes an address's device by looking the netdev's MAC up among
    the iWARP GIDs (cma_acquire_dev_by_src_ip: ENODEV when none has it), and sysfs
    shows an empty GID entry as zeros: so a listen refused ENODEV with
    ``gid0_set=0`` means the device registered without its GID, with
    ``gid0_is_the_netdev_mac=0`` that the MAC changed after it did.
    """
    read = {
        what: agent.run(tools.argv("cat", path), timeout=SYSFS_S).stdout.strip()
        for what, path in (
            ("gid", f"/sys/class/infiniband/{DEVICE}/ports/1/gids/0"),
            ("mac", f"/sys/class/net/{NETDEV}/address"),
        )
    }
    gid, mac = read["gid"].replace(":", ""), read["mac"].replace(":", "")
    return {
        "gid0_set": 1.0 if gid.strip("0") else 0.0,
        "gid0_is_the_netdev_mac": 1.0 if mac and gid.startswith(mac) else 0.0,
    }


@dataclass(frozen=True)
class Removal:
    """The veth's deletion under the bound id: when it began, its action, the kill of
    the id's process, whether DEVICE_REMOVAL came before that, whether the device went."""

    start_us: int
    deleted: Action
    kill: Action
    early: bool
    gone: bool


@sequence
def regress_siw_netdev_removed(s: PairSides) -> Timeline:
    """syzbot 4b87489410b4efd181bf: a siw device's netdev deleted under queries and a bound id."""
    if s.journal is None:
        raise InputError("regress_siw_netdev_removed changes a host: it needs a restore journal")
    host, agent = s.host(s.active), s.agent(s.active)
    removal = None
    with s.recording("regress-siw-netdev-removed") as rec:
        made = make_device(s.journal, host, agent)
        try:
            listener = steps.listen(rec, s.passive)
            conn = steps.establish(rec, rec.endpoint(s.active), listener, "pair")
            bound = rec.endpoint(s.active)
            port = s.port()
            with Queries(agent) as queries:
                got = bind(lambda: bound.listen(ADDRESS, port, 4), queries, LISTED_S)
                for name, value in (gid_evidence(agent) if not got.ok else {}).items():
                    rec.metric(name, value)  # why it was refused (read only then: CI pays nothing)
                if got.ok:
                    removal = _remove(rec, s.active, agent, bound, got.listen)
            steps.payload(conn)  # after the removal: the pair's connection did not notice
            steps.close(conn)
            steps.teardown(conn)
            steps.destroy(listener.ep, listener.id)
        finally:
            s.journal.undo(s.journal.find([host], regress=made))
        rec.metric("port_queries", float(len(queries.done)))
        rec.metric("listens", float(got.tries))
        note(rec, "id_bound_to_the_device", got.ok)
        note(rec, "queries_saw_the_device", any(listed for *_, listed in queries.done))
        # The bug's window: a port query running while the netdev is unregistered.
        window(
            rec,
            "a_port_query_ran_across_the_removal",
            bool(removal and queries.across(removal.start_us)),
        )
        rec.metric("removal_before_the_exit", 1.0 if removal and removal.early else 0.0)
        note(
            rec,
            "removal_waited_for_the_devices_user",
            bool(removal and removal.deleted.end_us >= removal.kill.t_us),
        )
        note(rec, "device_gone", bool(removal and removal.gone))
    return rec.timeline()


def _remove(rec: Recording, side: str, agent: Agent, bound: Endpoint, got: Outcome) -> Removal:
    """Delete the veth under the bound id, let the id's process go after HOLD_S, and wait
    for the device to go."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        start = controller_us()
        # The unregistration waits for what uses the device: the bound id and the verbs
        # context librdmacm opened for it (siw cannot disassociate one), so DEVICE_REMOVAL
        # only comes once its process has let go of both, by exiting.
        deleting = pool.submit(agent.delete_link, NETDEV)
        early = bound.wait("DEVICE_REMOVAL", got.id, HOLD_S) if got.id else None
        kill = bound.kill((got.id,) if got.id else ())
        deleting.result()
        deleted = rec.controller_action(side, "delete_netdev", start, netdev=NETDEV)
    return Removal(start, deleted, kill, early is not None, wait_gone(agent))


def make_device(journal: Journal, host: str, agent: Agent) -> str:
    """The veth, its address and the siw device on it, each journaled first; the tag
    the journal finds them by."""
    tag = f"{NETDEV}-{controller_us()}"
    for undo in (
        agent_undo("delete_link", f"delete veth {NETDEV}", name=NETDEV),
        agent_undo("rdma_delete_link", f"delete siw device {DEVICE}", name=DEVICE),
    ):
        undo.update(missing_ok=True, regress=tag)
        journal.change(host, undo)
    agent.add_link(NETDEV, "veth", PEER, mac=MACS[0], peer_mac=MACS[1])
    agent.add_address(NETDEV, f"{ADDRESS}/{PREFIX}")
    agent.set_link(NETDEV, up=True)
    agent.set_link(PEER, up=True)
    agent.add_siw(DEVICE, NETDEV)
    return tag


def wait_gone(agent: Agent) -> bool:
    """Whether the device is gone from the host's ``rdma link`` within :data:`GONE_S`."""
    return wait_listed(agent, False, GONE_S)


def wait_listed(agent: Agent, listed: bool, timeout: float) -> bool:
    """Whether the host's ``rdma link`` lists the device (``listed``) or not within
    ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(p.device == DEVICE for p in agent.rdma_links(timeout=10)) == listed:
            return True
        time.sleep(0.2)
    return False
