"""What the ``cm_pair`` fixture (tests/cm/conftest.py) gives a test."""

from __future__ import annotations

from dataclasses import dataclass

from hil.host.hosts import Hosts
from hil.host.journal import Journal
from hil.inventory.model import Pair
from hil.run import PairRun


@dataclass(frozen=True)
class CMPair:
    """A set-up pair run, and what the CLI needs to act under its lease."""

    run: PairRun
    # For the CLI: ``hil --inventory INVENTORY [--store STORE] cm run ... --lease LEASE``.
    inventory: str
    store: str | None

    @property
    def hosts(self) -> Hosts:
        """The pair's hosts (agents)."""
        return self.run.hosts

    @property
    def pair(self) -> Pair:
        """The pair."""
        return self.run.pair

    @property
    def journal(self) -> Journal:
        """The run's restore journal."""
        return self.run.journal

    @property
    def lease(self) -> str:
        """The id of the lease the run holds."""
        return self.run.lease.id
