"""The virtual lab, booted once per test session for the tests marked ``lab``."""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest
from vlab import VirtualLab

from hil.inventory import loader
from hil.lab import control


@pytest.fixture(scope="session")
def virtual_lab(tmp_path_factory: pytest.TempPathFactory,
                pytestconfig: pytest.Config) -> Iterator[VirtualLab]:
    """Two guests up (building the kernel first if it is not cached), down at the end."""
    capture = pytestconfig.pluginmanager.getplugin("capturemanager")

    def say(line: str) -> None:
        # Progress (a kernel build takes minutes) goes to the terminal, not the capture.
        with capture.global_and_fixture_disabled():
            print(line, file=sys.stderr, flush=True)

    lab_dir = tmp_path_factory.mktemp("vlab")
    try:
        state = control.up(lab_dir, hosts=2, memory="768M", say=say)
        inventory = loader.load(control.inventory_path(lab_dir))
        yield VirtualLab(lab_dir, state, inventory)
    finally:
        control.down(lab_dir, say=say)
