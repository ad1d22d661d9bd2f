"""The pair the CM engine's lab tests run on.

``cm_pair`` is the pair the hil plugin reserved and set up when the run has a
lab inventory (``--hil-inventory``, e.g. the shared dev lab); otherwise it
boots a virtual lab of two siw guests for the session (``hil.lab``), reserves
its pair in a throwaway store, sets it up, and takes everything down at the end.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from cmlab import CMPair

from hil.hosts import Hosts
from hil.journal import Journal


@pytest.fixture(scope="session")
def cm_pair(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[CMPair]:
    """A set-up lab pair for the session (the plugin's, or a virtual lab booted here)."""
    if request.config.getoption("hil_inventory") or request.config.getoption("hil_lease"):
        reserved = request.getfixturevalue("hil_pair")
        request.getfixturevalue("hil_setup")
        yield CMPair(request.getfixturevalue("hil_hosts"), reserved.pair,
                     request.getfixturevalue("hil_journal"), str(reserved.inventory.path),
                     request.config.getoption("hil_store"), reserved.lease.id)
        return
    yield from _own_lab(request, tmp_path_factory.mktemp("cmlab"))


def _own_lab(request: pytest.FixtureRequest, lab_dir: Path) -> Iterator[CMPair]:
    from hil.inventory import loader
    from hil.lab import control
    from hil.pairsetup import setup_pair
    from hil.reservation import Claim, Holder, open_store, reserve

    capture = request.config.pluginmanager.getplugin("capturemanager")

    def say(line: str) -> None:
        with capture.global_and_fixture_disabled():
            print(line, file=sys.stderr, flush=True)

    try:
        control.up(lab_dir, hosts=2, memory="768M", say=say)
        inventory = loader.load(control.inventory_path(lab_dir))
        pair = inventory.pairs()[0]
        store_path = str(lab_dir / "store.db")
        with open_store(store_path) as store:
            claim = Claim(pair.name, (pair.host_a.name, pair.host_b.name))
            lease = reserve(store, [claim], Holder.current("tests/cm"), ttl=3600)
            with Hosts(inventory, store) as hosts:
                journal = Journal(hosts, store, lease.id)
                try:
                    setup_pair(hosts, pair, journal)
                    yield CMPair(hosts, pair, journal, str(inventory.path), store_path,
                                 lease.id)
                finally:
                    journal.close().check(f"restoring pair {pair.name}")
    finally:
        control.down(lab_dir, say=say)
