"""The pair the CM engine's lab tests run on.

``cm_pair`` is the pair the hil plugin reserved and set up when the run has a
lab inventory (``--hil-inventory``, e.g. the shared dev lab); otherwise it
takes the session's virtual lab of two siw guests (``virtual_lab``, shared
with tests/lab), reserves its pair in a throwaway store and sets it up once
for the lab tests here, restoring it after the last of them.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import ExitStack

import pytest
from cmlab import CMPair
from fake_rdma import FakeLib
from vlab import VirtualLab, lab_pair_run

from hil.agent.remote.cm.worker import Worker
from hil.agent.remote.librdmacm import CMChannel


class _LabPair:
    """The virtual lab's pair, set up once for the lab tests of tests/cm that run one
    after another (four modules; a setup takes 13-16 s on the TCG guests, measured in
    ci/tests's --durations), and restored once they are done."""

    def __init__(self) -> None:
        self._stack: ExitStack | None = None
        self._pair: CMPair | None = None

    def get(self, lab: VirtualLab, tmp: pytest.TempPathFactory) -> CMPair:
        """The set-up pair, set up now if it is not."""
        if self._pair is None:
            scratch = tmp.mktemp("cm")
            stack = ExitStack()
            run = stack.enter_context(lab_pair_run(lab, scratch, "tests/cm"))
            self._stack = stack
            self._pair = CMPair(run, str(lab.inventory.path), str(scratch / "store.db"))
        return self._pair

    def close(self) -> None:
        """Restore and release the pair, if it is set up."""
        stack, self._stack, self._pair = self._stack, None, None
        if stack is not None:
            stack.close()


_LAB_PAIR = _LabPair()


@pytest.fixture(scope="session")
def _lab_pair() -> Iterator[_LabPair]:
    """The holder, which restores the pair at the session's end too (an interrupted one)."""
    try:
        yield _LAB_PAIR
    finally:
        _LAB_PAIR.close()


@pytest.fixture
def cm_pair(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> CMPair:
    """A set-up lab pair (the plugin's, or one of the session's virtual lab)."""
    if request.config.getoption("hil_inventory") or request.config.getoption("hil_lease"):
        run = request.getfixturevalue("hil_run")
        request.getfixturevalue("hil_setup")
        return CMPair(run, str(run.inventory.path), request.config.getoption("hil_store"))
    # The lab first: torn down after the holder, it is still up for the restore.
    lab = request.getfixturevalue("virtual_lab")
    holder: _LabPair = request.getfixturevalue("_lab_pair")
    return holder.get(lab, tmp_path_factory)


# trylast: after the test's own fixtures are torn down.
@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """Restore the lab pair once the next test does not use it: before the other lab
    tests set the same pair up on stores of their own, and before tests/lab takes the
    lab down."""
    if "cm_pair" not in getattr(nextitem, "fixturenames", ()):
        _LAB_PAIR.close()


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
