"""What the ``virtual_lab`` fixture gives a test."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from hil.inventory.model import Inventory
from hil.lab.state import LabState


@dataclass(frozen=True)
class VirtualLab:
    """A running two-guest lab: its directory, recorded state and inventory."""

    dir: Path
    state: LabState
    inventory: Inventory
