"""CMSession: run RDMA CM sequences on a set-up pair and get timelines back.

API (for suites and the CLI)::

    from hil.cm import sequences
    from hil.cm.session import CMSession
    from hil.judge.contract import check

    session = pair_run.session("a-b")       # hil.run.PairRun: the usual way to get one
    timeline = session.run(sequences.reject, private_data=b"no thanks")  # or "reject"
    verdict = check(timeline, session.profile)

- ``CMSession(hosts, pair, *, profile, direction="a-b", journal=None,
  evidence=True, observers=None, family=None)``: ``hosts`` is a :class:`hil.host.hosts.Hosts`
  (one agent per host), ``pair`` the reserved
  :class:`~hil.inventory.model.Pair`, already set up
  (:func:`hil.host.pairsetup.setup_pair`).  ``profile`` is the contract profile of
  the provider the pair really runs, or each host's own for a pair whose hosts
  differ (:class:`~hil.judge.profiles.PairProfile`; :mod:`hil.run.provider`
  reads it); the steps' waits follow it (:func:`hil.cm.steps.waits`).
  ``direction`` says which side connects ("a-b": host A is active).
  ``journal`` is needed only for link pulls.  ``evidence`` takes resource
  counts and the kernel log around every run (invariant 11).  ``observers``
  (:class:`hil.cm.observer.Observers`) hear of every run, action, event
  batch, timeline and verdict.  ``family`` ("ipv4" or "ipv6") picks the
  ports' data addresses (:meth:`~hil.inventory.model.Rnic.address_of`); None
  takes the first the pair offers (``pair.families``).
- ``session.run(sequence, **params) -> Timeline``: ``sequence`` is the
  function (a suite's way: it type-checks and an editor finds it) or the
  name it is registered under (the CLI's: :mod:`hil.cm.registry`); the
  built-in ones, their parameters and metrics are listed in
  :mod:`hil.cm.sequences`.
- ``session.active`` / ``session.passive``: sides ("a"/"b") for the direction;
  ``session.host(side)``, ``session.agent(side)``, ``session.address(side)``
  (the port's data IP), ``session.offset(side)`` (the host's
  :class:`~hil.judge.timeline.ClockOffset`, measured once, refreshed by
  :meth:`refresh_offsets`), ``session.port()`` (a fresh TCP port per use),
  ``session.pull_modes()`` (the modes the pair's link offers),
  ``session.link_control()`` (:class:`hil.host.linkctl.LinkControl`),
  ``session.impaired(way, impairments)`` (the pair's path impaired inside a block;
  a delay is recorded as the sender's hold by every run in it).
- ``session.recording(scenario)``: a :class:`~hil.cm.recording.Recording`
  context for writing a new sequence from the steps in :mod:`hil.cm.steps`.

Everything but ``run`` is :class:`hil.cm.sides.PairSides`, which is what a
sequence runs on: the sequences sit below the session that runs them by
name, so that the runner's imports form no cycle (:mod:`hil.cm.interfaces`).

Every timeline is on the controller's CLOCK_MONOTONIC (µs); each host's
events are moved onto it by that host's offset, known to +/- its
``uncertainty_us`` (half the tightest ``cm_now`` round trip).
"""

from __future__ import annotations

from typing import Any

import hil.cm.unreachable  # noqa: F401 -- the unreachable sequence registers itself
from hil.cm import races, regressions, sequences, storm  # noqa: F401 -- the built-in sequences register themselves
from hil.cm.observer import StepInfo
from hil.cm.registry import Sequence, lookup
from hil.cm.sides import PairSides
from hil.judge.contract import check
from hil.judge.timeline import Timeline


class CMSession(PairSides):
    """Both ends of a set-up pair, ready to run CM sequences by name (see the module doc)."""

    def run(self, sequence: Sequence | str, **params: Any) -> Timeline:
        """Run ``sequence`` (the function, or its name in :mod:`hil.cm.registry`) with
        ``params``."""
        seq = lookup(sequence) if isinstance(sequence, str) else sequence
        with self.observers.step(StepInfo(seq.__name__, self.direction, dict(params))):
            timeline = seq(self, **params)  # its recording told the observers its timeline
            self.observers.verdict(timeline, check(timeline, self.profile))
            return timeline
