"""Fixtures for the agent's tests: throwaway network namespaces and agents in them."""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Iterator

import pytest
from agenttest import HOST_PYTHON, StrictAgent, needs_root


@pytest.fixture
def netns() -> Iterator[str]:
    """A new, empty network namespace, deleted afterwards (also on failure)."""
    needs_root()
    name = f"hil-agent-{uuid.uuid4().hex[:8]}"
    subprocess.run(["ip", "netns", "add", name], check=True, timeout=10)
    try:
        yield name
    finally:
        subprocess.run(["ip", "netns", "delete", name], check=True, timeout=10)


@pytest.fixture
def agent(netns: str) -> Iterator[StrictAgent]:
    """The real agent zipapp, run by the host's python3 inside ``netns``
    (each reply checked strictly against the protocol)."""
    with StrictAgent.local(["ip", "netns", "exec", netns, HOST_PYTHON], name=netns) as a:
        yield a


@pytest.fixture
def host_agent() -> Iterator[StrictAgent]:
    """The real agent zipapp, run by the host's python3 in the test's own namespace
    (each reply checked strictly against the protocol)."""
    with StrictAgent.local([HOST_PYTHON], name="testhost") as a:
        yield a
