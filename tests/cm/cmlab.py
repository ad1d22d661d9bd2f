"""What the ``cm_pair`` fixture (tests/cm/conftest.py) gives a test."""

from __future__ import annotations

from dataclasses import dataclass

from hil.hosts import Hosts
from hil.inventory.model import Pair
from hil.journal import Journal


@dataclass(frozen=True)
class CMPair:
    """A set-up pair: its hosts (agents), the pair and the restore journal."""

    hosts: Hosts
    pair: Pair
    journal: Journal
    # For the CLI: ``hil --inventory INVENTORY [--store STORE] cm run ... --lease LEASE``.
    inventory: str
    store: str | None
    lease: str
