"""A test directory of a lab's own, with only ``-p hil`` and an inventory, gets the CM fixtures.

On the session's virtual lab (real siw guests): ``cm``, ``profile``,
``contract`` and ``direction`` come from the plugin itself, not from a
conftest.py copied out of suites/.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from vlab import VirtualLab

pytest_plugins = ["pytester"]
pytestmark = pytest.mark.lab

OWN_SUITE = """
def test_connect_is_judged_by_the_pairs_profile(cm, profile, contract, direction):
    assert profile.name == "siw"
    assert cm.direction == direction
    verdict = contract(cm.run("connect"))
    assert verdict.ok and verdict.profile == "siw"
"""


def test_a_suite_outside_suites_gets_cm_profile_and_contract(
    pytester: pytest.Pytester, virtual_lab: VirtualLab, tmp_path: Path
) -> None:
    pytester.makepyfile(test_own_suite=OWN_SUITE)
    result = pytester.runpytest_subprocess(
        "-p",
        "hil",
        "--hil-inventory",
        str(virtual_lab.inventory.path),
        "--hil-store",
        str(tmp_path / "store.db"),
        "-p",
        "no:cacheprovider",
        timeout=600,
    )
    result.assert_outcomes(passed=2)  # one per direction: a-b and b-a
