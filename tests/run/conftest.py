"""Fixtures for pair runs on the recorded T6 pair (tests/data/t6) instead of SSH and agents."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fake_hosts import FakeHosts, e810_hosts, t6_hosts

import hil.host.hosts
from hil.inventory.model import Inventory


@pytest.fixture
def fakes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, FakeHosts]:
    """The recorded T6 (or, for an inventory of e810a, E810) hosts a PairRun opens
    (instead of SSH and agents)."""
    made: dict[str, FakeHosts] = {}

    class Hosts(FakeHosts):
        def __init__(self, inventory: Inventory, store: Any) -> None:
            pair = e810_hosts if "e810a" in inventory.hosts else t6_hosts
            recorded = pair(tmp_path / "hosts", inventory)
            super().__init__(inventory, store, recorded.agents)
            made["hosts"] = self

        def call(self, name: str, method: str, /, timeout: float | None = None, **p: Any) -> Any:
            # PairRun warms each agent up with "links"; a fake needs no warming.
            return [] if method == "links" else super().call(name, method, timeout, **p)

        def close(self) -> None:
            pass

    monkeypatch.setattr(hil.host.hosts, "Hosts", Hosts)
    return made
