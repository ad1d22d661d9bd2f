"""Fixtures of the host-control tests that run against the netns lab."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from netnslab.lab import NetnsLab

from hil.host.hosts import Hosts
from hil.host.journal import Journal
from hil.reservation import Store


@pytest.fixture
def netns_hosts(netns_lab: NetnsLab, store: Store) -> Iterator[Hosts]:
    """The session's netns lab's hosts, opened for one test."""
    with Hosts(netns_lab.inventory(), store) as hosts:
        yield hosts


@pytest.fixture
def run_journal(netns_hosts: Hosts, store: Store) -> Iterator[Journal]:
    """A run's restore journal on the netns hosts; its teardown undoes what the test left."""
    journal = Journal(netns_hosts, store, f"test-{uuid.uuid4().hex[:8]}")
    yield journal
    journal.close().check("test teardown")
