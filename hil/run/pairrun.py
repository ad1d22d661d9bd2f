"""PairRun: the one place that turns a request for a pair into a set-up pair and its profile.

Every user of a pair (the pytest plugin's fixtures, ``hil cm run``, ``hil
host setup``, the benches) goes through it, so that the same pair gets the
same setup, the same provider and the same verdict wherever it is judged::

    with PairRun(inventory, store, PairRequest(pair="lab-0-1", holder="bench")) as run:
        session = run.session("a-b")
        timeline = session.run("close")

The stages, in order (the context manager runs the first three; the plugin
runs them one by one, as its fixtures are first needed):

1. :meth:`reserve`: take a lease (or adopt one named by ``request.lease``)
   and renew it from a heartbeat thread;
2. :meth:`open_hosts`: SSH and an agent per host, warmed up in parallel, and
   (unless the lease was adopted: its holder's changes are its own) the
   journal that dead runs left on the pair's hosts replayed
   (:mod:`hil.run.warmup`);
3. :meth:`set_up`: the pair brought to the inventory's state under a
   restore journal, its module parameters pinned (the link's
   ``module_params``, overridden by the request's; read back on both hosts)
   and its irdma ends' devlink parameters (the link's ``devlink_params``),
   then the provider read on both hosts (:mod:`hil.run.provider`, so the
   profile follows the pinned values) and observers told ``run_started``;
4. :meth:`restore`: observers told ``run_finished``, the journal undone and
   the hosts closed; 5. :meth:`release`: the heartbeat stopped and the lease
   released (unless adopted).  :meth:`close` does both; after :meth:`keep`
   (``hil host setup``) neither undoes the setup nor releases the lease.

What a run asks for (:class:`PairRequest`) is in :mod:`hil.run.request`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Self

from hil.cm.observer import Observer, RunInfo
from hil.errors import HilError, InputError, LeaseLost
from hil.inventory.model import Family, PinnedParam
from hil.reservation import Heartbeat, Lease
from hil.run.observer import Observers
from hil.run.pairfacts import PairFacts
from hil.run.request import PairRequest, Progress, module_params_for, take_lease
from hil.run.warmup import warm_up

if TYPE_CHECKING:
    from hil.cm.endpointpool import EndpointPool
    from hil.cm.session import CMSession
    from hil.host.hosts import Hosts
    from hil.host.journal import Journal, UndoReport
    from hil.host.liveness import Crash
    from hil.host.pairsetup import PairState
    from hil.inventory.model import Inventory, Pair
    from hil.judge.profiles import Profiles
    from hil.reservation.store import Store
    from hil.run.provider import Provider
    from hil.run.testparts import TestOptions
    from hil.run.testrun import TestRun
    from hil.run.wirestage import LinkWire

log = logging.getLogger(__name__)


class PairRun:
    """A pair held, its hosts open, set up and judged by its own provider (see module doc)."""

    def __init__(
        self,
        inventory: Inventory,
        store: Store,
        request: PairRequest,
        *,
        observers: Iterable[Observer] = (),
        progress: Progress | None = None,
    ) -> None:
        self.inventory = inventory
        self.store = store
        self.request = request
        self.observers = Observers(observers)
        self._progress = progress
        self._lease: Lease | None = None
        self._heartbeat: Heartbeat | None = None
        self._hosts: Hosts | None = None
        self._journal: Journal | None = None
        self._state: PairState | None = None
        self._provider: Provider | None = None
        self._pinned: dict[str, dict[str, str]] = {}
        self._facts: PairFacts | None = None
        self._wire: LinkWire | None = None  # the link's capture, from the first test's on
        self._kept = False

    # -- stages ---------------------------------------------------------------

    def reserve(self) -> Lease:
        """Reserve (or adopt) the pair and start renewing the lease."""
        if self._lease is None:
            self._lease = take_lease(self.inventory, self.store, self.request, self._progress)
            self._heartbeat = Heartbeat(self.store, self._lease).start()
        return self._lease

    def open_hosts(self) -> Hosts:
        """The pair's hosts with warm agents, after undoing what dead runs left there."""
        if self._hosts is not None:
            return self._hosts
        from hil.host.hosts import Hosts
        from hil.host.journal import Journal

        self.reserve()
        hosts = Hosts(self.inventory, self.store)
        self._hosts = hosts
        warm_up(hosts, self.store, self.pair, replay_journal=not self.adopted)
        # Fenced: every journaled change checks the lease's token (docs/reliability.md#fencing).
        self._journal = Journal(hosts, self.store, self.lease.id, token=self.lease.token)
        return hosts

    def set_up(self) -> PairState:
        """The pair brought to the inventory's state; its provider read on both hosts."""
        if self._state is not None:
            return self._state
        from hil.host.devlinkparams import pin_devlink
        from hil.host.healthcheck import failures_noted
        from hil.host.modparams import pin_params
        from hil.host.pairsetup import setup_pair
        from hil.run.provider import announce, detect

        hosts = self.open_hosts()
        params = self.module_params  # a bad override fails before anything changes
        with failures_noted(self.store):  # host health: a host lost during setup
            state = setup_pair(hosts, self.pair, self.journal, rdma=self.request.rdma)
            self._pinned = pin_params(hosts, self.pair, params, self.journal, state)
            devlink = self.pair.link.devlink_params
            for host, values in pin_devlink(hosts, self.pair, devlink, self.journal, state).items():
                self._pinned.setdefault(host, {}).update(values)
        self._state = state
        if self.request.rdma:
            self._provider = detect(hosts, self.pair, self._state)
            announce(self._provider, self.pair.name, self._progress, log)
            self.observers.run_started(self.info)
        return self._state

    def fence(self) -> None:
        """Raise ``LeaseLost`` naming the new holder unless this run still holds its lease
        (its id and fencing token); for a disruptive action the journal does not fence,
        such as a power cycle, immediately before it."""
        self.store.fence(self.lease.id, self.lease.token)

    def recover(self, host: str, *, say: Progress, timeout: float) -> None:
        """A crashed ``host`` of the pair recovered (power cycle, its journal replayed, its
        health checked: :func:`hil.host.recovery.recover`, fenced by this run's lease),
        then the other host's changes undone and the pair set up again.  HilError (or
        LeaseLost) when it cannot be; ``say`` gets each step."""
        from hil.host.recovery import recover

        recover(self.hosts, self.store, host, fence=self.fence, say=say, timeout=timeout)
        # The recovered host's journal was replayed; the other's is undone here.
        self.restore()
        self.set_up()

    def keep(self) -> None:
        """Leave the pair set up and the lease held when the run closes (``hil host setup``)."""
        self._kept = True

    def restore(self, error: BaseException | None = None) -> UndoReport | None:
        """Observers told the run is over; the journal undone and the hosts closed.

        Returns the journal's report (None when the hosts were never opened);
        the hosts are closed even when an undo fails.  Safe to call again.
        """
        from hil.host.healthcheck import note_undo_failures

        report = None
        try:
            if self._wire is not None:
                self._wire.discard()
            if self._provider is not None:
                self.observers.run_finished(self.info, error)
            if self._journal is not None and not self._kept:
                report = self._journal.close()
                note_undo_failures(self.store, report)  # host health: restore failed
        finally:
            self._provider = self._state = self._journal = self._facts = self._wire = None
            self._pinned = {}
            hosts, self._hosts = self._hosts, None
            if hosts is not None:
                hosts.close()
        return report

    def release(self) -> None:
        """Stop renewing the lease and release it (unless adopted or kept).  Safe to call again."""
        if self._heartbeat is not None:
            self._heartbeat.stop()
            self._heartbeat = None
        lease, self._lease = self._lease, None
        if lease is not None and not self.adopted and not self._kept:
            self.store.release(lease.id)

    def close(self, error: BaseException | None = None) -> UndoReport | None:
        """:meth:`restore`, then :meth:`release` whatever the restore did."""
        try:
            return self.restore(error)
        finally:
            self.release()

    def __enter__(self) -> Self:
        try:
            self.set_up()
        except BaseException as e:
            self._close_after(e)
            raise
        return self

    def __exit__(self, kind: object, error: BaseException | None, tb: object) -> None:
        name = self.pair.name
        report = self._close_after(error)
        if error is None and report is not None:
            report.check(f"restoring pair {name}")

    def _close_after(self, error: BaseException | None) -> UndoReport | None:
        """``close``, logging (not raising) undo failures when an error is already on its way."""
        report = self.close(error)
        if error is not None and report is not None:
            for failure in report.failed:
                log.warning("%s", failure)
        return report

    # -- what the run holds ---------------------------------------------------

    @property
    def adopted(self) -> bool:
        """True when the lease was taken by someone else and only adopted here."""
        return bool(self.request.lease)

    @property
    def lease(self) -> Lease:
        """The lease (after :meth:`reserve`)."""
        if self._lease is None:
            raise InputError("the pair run has not reserved a pair yet")
        return self._lease

    @property
    def lease_lost(self) -> LeaseLost | None:
        """Why the heartbeat lost the lease (taken over, store gone), or None."""
        return None if self._heartbeat is None else self._heartbeat.lost

    @property
    def pair(self) -> Pair:
        """The reserved pair."""
        return self.inventory.pair(self.lease.pair)

    @property
    def hosts(self) -> Hosts:
        """The pair's hosts (opened on first use)."""
        return self.open_hosts()

    @property
    def journal(self) -> Journal:
        """The run's restore journal (the hosts are opened on first use)."""
        self.open_hosts()
        assert self._journal is not None
        return self._journal

    @property
    def module_params(self) -> tuple[PinnedParam, ...]:
        """The module parameters the run pins: the link's, overridden by the request's
        (InputError for a bad override: :func:`~hil.run.request.module_params_for`)."""
        return module_params_for(self.pair, self.request)

    @property
    def pinned(self) -> dict[str, dict[str, str]]:
        """Per host, each pinned parameter (``driver.name``, ``devlink.name``) as read back
        at setup ({} before)."""
        return self._pinned

    @property
    def state(self) -> PairState:
        """The pair after setup."""
        return self.set_up()

    @property
    def provider(self) -> Provider:
        """The provider both hosts run (read at setup); InputError for an rdma=False run."""
        self.set_up()
        if self._provider is None:
            raise InputError(
                f"pair {self.pair.name} was set up without RDMA "
                "(rdma=False): it has no provider and no contract profile"
            )
        return self._provider

    @property
    def profile(self) -> Profiles:
        """The contract profile of the provider the pair really runs."""
        return self.provider.profile

    @property
    def info(self) -> RunInfo:
        """The run as observers see it."""
        p = self.provider
        try:
            profile = p.profile.name
        except HilError as e:
            profile = f"none ({e})"
        return RunInfo(
            self.pair.name,
            (self.pair.host_a.name, self.pair.host_b.name),
            self.lease.id,
            p.driver,
            profile,
        )

    @property
    def facts(self) -> PairFacts:
        """What the run's tests read once: kernels, kmemleak hosts, evidence targets."""
        if self._facts is None:
            self._facts = PairFacts(self.hosts, (self.pair.host_a.name, self.pair.host_b.name))
        return self._facts

    @property
    def wire(self) -> LinkWire:
        """The link's capture over the run, cut into a window per test (started by the first)."""
        if self._wire is None:
            from hil.run.wirestage import LinkWire

            self._wire = LinkWire(self.hosts, self.pair, self.provider.driver)
        return self._wire

    def test(
        self,
        name: str,
        options: TestOptions | None = None,
        *,
        rdma: bool = True,
        on_crash: Callable[[Crash], None] | None = None,
        describe: Callable[[Crash], Crash] | None = None,
    ) -> TestRun:
        """One test on the pair, every stage around it in order
        (:class:`hil.run.testrun.TestRun`; use it as a context manager).  The pair is
        set up first, unless ``rdma=False`` (a test of the hosts only)."""
        from hil.run.testrun import TestRun

        if rdma:
            self.set_up()
        else:
            self.open_hosts()
        return TestRun(self, name, options, rdma=rdma, on_crash=on_crash, describe=describe)

    def skipped(self, name: str, reason: str) -> None:
        """Tell the observers of a test skipped before its setup (the pair lacks what it
        requires), so that its report still names the pair's kernels."""
        from hil.run.testrun import tell_skipped

        tell_skipped(self, name, reason)

    def session(
        self,
        direction: str = "a-b",
        *,
        evidence: bool = True,
        family: Family | None = None,
        pool: EndpointPool | None = None,
    ) -> CMSession:
        """A CM session on the set-up pair, judged by the run's profile, told to the observers;
        on the data addresses of ``family`` (None: the first the pair offers); its
        recordings keep their endpoints in ``pool`` (hil.cm.endpointpool), if given."""
        from hil.cm.session import CMSession

        return CMSession(
            self.hosts,
            self.pair,
            direction=direction,
            profile=self.profile,
            journal=self.journal,
            evidence=evidence,
            observers=self.observers,
            family=family,
            pool=pool,
        )
