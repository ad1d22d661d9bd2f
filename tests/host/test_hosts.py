"""Hosts (hil/host/hosts.py): forgetting a crashed or powered-off host."""

from __future__ import annotations

from pathlib import Path
from typing import cast

from hil.agent import Agent
from hil.host.hosts import Hosts
from hil.inventory.model import Inventory
from hil.ssh import SSHPool


class FakePool:
    """The SSH boundary: records which session was dropped."""

    def __init__(self, said: list[str]) -> None:
        self.said = said

    def drop(self, name: str) -> None:
        self.said.append(f"session to {name} dropped")


class FakeAgent:
    """The agent on the host: records its close."""

    def __init__(self, said: list[str]) -> None:
        self.said = said

    def close(self) -> None:
        self.said.append("agent closed")


def test_forget_drops_the_session_before_closing_the_agent() -> None:
    # A frozen host's connection still looks open: an agent closed over it first would
    # wait out its close bound before a recovery could power-cycle the host.
    said: list[str] = []
    hosts = Hosts(Inventory(path=Path("inventory.yaml")), pool=cast(SSHPool, FakePool(said)))
    hosts._agents["t6-a"] = cast(Agent, FakeAgent(said))
    hosts.forget("t6-a")
    assert said == ["session to t6-a dropped", "agent closed"]
    hosts.forget("t6-a")  # forgotten already: only the (absent) session is dropped again
    assert said[2:] == ["session to t6-a dropped"]
