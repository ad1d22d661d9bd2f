"""The pair the CM engine's lab tests run on.

``cm_pair`` is the pair the hil plugin reserved and set up when the run has a
lab inventory (``--hil-inventory``, e.g. the shared dev lab); otherwise it
takes the session's virtual lab of two siw guests (``virtual_lab``, shared
with tests/lab), reserves its pair in a throwaway store and sets it up,
restoring it at the end.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from cmlab import CMPair
from fake_rdma import FakeLib
from vlab import VirtualLab, lab_pair_run

from hil.agent.remote.cm.worker import Worker
from hil.agent.remote.librdmacm import CMChannel


# Module scope: the pair is restored before tests/lab takes the shared lab down.
@pytest.fixture(scope="module")
def cm_pair(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[CMPair]:
    """A set-up lab pair (the plugin's, or one of the session's virtual lab)."""
    if request.config.getoption("hil_inventory") or request.config.getoption("hil_lease"):
        run = request.getfixturevalue("hil_run")
        request.getfixturevalue("hil_setup")
        yield CMPair(run, str(run.inventory.path), request.config.getoption("hil_store"))
        return
    yield from _own_lab(request.getfixturevalue("virtual_lab"), tmp_path_factory.mktemp("cm"))


def _own_lab(lab: VirtualLab, scratch: Path) -> Iterator[CMPair]:
    with lab_pair_run(lab, scratch, "tests/cm") as run:
        yield CMPair(run, str(lab.inventory.path), str(scratch / "store.db"))


@pytest.fixture
def worker() -> Iterator[tuple[Worker, FakeLib]]:
    """A CM worker over the fake librdmacm (fake_rdma.py), its poller running."""
    lib = FakeLib()
    w = Worker(CMChannel(lib))  # type: ignore[arg-type]
    poller = threading.Thread(target=w.poller.run, daemon=True)
    poller.start()
    yield w, lib
    w.poller.closing.set()
    poller.join(2)
    w.close()
