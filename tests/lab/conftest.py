"""The virtual lab, booted once per test session for the tests marked ``lab``."""

from __future__ import annotations

import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from vlab import VirtualLab

from hil.inventory import loader
from hil.lab import control


@pytest.fixture(scope="session")
def virtual_lab(pytestconfig: pytest.Config) -> Iterator[VirtualLab]:
    """Two guests up (building the kernel first if it is not cached), down at the end."""
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
        state = control.up(lab_dir, hosts=2, memory="768M", say=say)
        inventory = loader.load(control.inventory_path(lab_dir))
        yield VirtualLab(lab_dir, state, inventory)
    finally:
        try:
            control.down(lab_dir, say=say)
        finally:
            shutil.rmtree(home, ignore_errors=True)
