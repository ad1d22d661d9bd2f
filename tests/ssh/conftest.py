"""Fixtures for the SSH transport's tests, all against the netns lab's real sshd."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from netnslab import NetnsLab

from hil.inventory.model import Inventory
from hil.ssh import SSHPool, SSHSession


@pytest.fixture(scope="session")
def lab_inventory(netns_lab: NetnsLab) -> Inventory:
    return netns_lab.inventory()


@pytest.fixture
def pool(lab_inventory: Inventory) -> Iterator[SSHPool]:
    """A fresh pool on the lab, ignoring the user's ~/.ssh/config."""
    with SSHPool(lab_inventory, ssh_config=None) as p:
        yield p


@pytest.fixture
def session(pool: SSHPool) -> SSHSession:
    return pool.get("ns0")
