"""What the ``virtual_lab`` fixture gives a test, and how a test boots a lab of its own."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from hil.inventory.model import Inventory, Pair
from hil.lab.state import LabState

if TYPE_CHECKING:
    from hil.run import PairRun


@dataclass(frozen=True)
class VirtualLab:
    """A running two-guest lab: its directory, recorded state and inventory.

    Host and pair names carry the lab's id (unique to its directory): take
    them from here (``inventory``, ``pair``), never write ``lab0``.
    """

    dir: Path
    booted: LabState  # as ``up`` left it
    inventory: Inventory

    @property
    def state(self) -> LabState:
        """The lab as recorded now: a guest started again (recovery) has a new QEMU pid."""
        from hil.lab.state import load

        return load(self.dir) or self.booted

    @property
    def pair(self) -> Pair:
        """The lab's one pair: two guests, one cable."""
        (pair,) = self.inventory.pairs()
        return pair


@contextmanager
def booted_lab(
    pytestconfig: pytest.Config, image: Path | None = None, middlebox: bool = False
) -> Iterator[VirtualLab]:
    """Two guests up in a fresh directory (a third bridging them with ``middlebox``),
    booting ``image`` (default: the lab kernel, built first if it is not cached); on
    leaving, even on failure, the lab is stopped and its directory removed."""
    # Imported here: most test runs never boot a lab.
    from hil.inventory import load as load_inventory
    from hil.lab import control

    capture = pytestconfig.pluginmanager.getplugin("capturemanager")

    def say(line: str) -> None:
        # Progress (a kernel build takes minutes) goes to the terminal, not the capture.
        with capture.global_and_fixture_disabled():
            print(line, file=sys.stderr, flush=True)

    # Under the home directory like the default lab dir: the guests see the
    # host's home read-only and the boot script hides /root, which must work.
    home = Path(tempfile.mkdtemp(prefix=".hil-test-lab-", dir=Path.home()))
    lab_dir = home / "lab"
    try:
        state = control.up(
            lab_dir, hosts=2, memory="768M", say=say, image=image, middlebox=middlebox
        )
        inventory = load_inventory(control.inventory_path(lab_dir))
        yield VirtualLab(lab_dir, state, inventory)
    finally:
        try:
            control.down(lab_dir, say=say)
        finally:
            shutil.rmtree(home, ignore_errors=True)


@contextmanager
def lab_pair_run(lab: VirtualLab, scratch: Path, holder: str) -> Iterator[PairRun]:
    """The lab's pair reserved in a throwaway store under ``scratch`` and set up; restored
    and released on leaving (the store is not in the lab's directory: `hil lab down`
    removes only what the lab made)."""
    from hil.reservation import open_store
    from hil.run import PairRequest, PairRun

    request = PairRequest(pair=lab.pair.name, holder=holder, ttl=3600)
    with (
        open_store(str(scratch / "store.db")) as store,
        PairRun(lab.inventory, store, request) as run,
    ):
        run.set_up()
        yield run


def hil_lab(*args: str) -> subprocess.CompletedProcess[str]:
    """``hil lab ARGS`` as a user runs it, its output captured (120 s bound)."""
    return subprocess.run(
        [sys.executable, "-m", "hil", "lab", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
