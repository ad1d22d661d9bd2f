"""``ci/suites``'s argument handling: named suites run alone, none named runs them all.

ci/suites runs in a copy of the repository's ci/ whose ``ci/install``,
``.venv/bin/hil`` and ``.venv/bin/python`` are stand-ins that log their argument
lists (the lab and pytest are not what is tested here).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from ci_stubs import ci_copy


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return ci_copy(tmp_path, "suites", hil_body='[ "$1 $2" != "lab up" ] || echo /tmp/inv.yaml')


def pytest_call(repo: Path, *args: str, inventory: str = "") -> str:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(repo), "HIL_INVENTORY": inventory}
    done = subprocess.run(
        [str(repo / "ci" / "suites"), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    calls = (repo / "calls.log").read_text().splitlines()
    return [c for c in calls if c.startswith("python -m pytest")][-1]


def test_no_suite_named_runs_every_suite_on_the_virtual_lab(repo: Path) -> None:
    got = pytest_call(repo, "-k", "close")
    assert got == "python -m pytest suites --hil-inventory /tmp/inv.yaml -k close"


@pytest.mark.parametrize("named", ["suites/test_close.py", "suites/test_close.py::test_x"])
def test_a_named_suite_runs_alone(repo: Path, named: str) -> None:
    got = pytest_call(repo, named, "-q")
    assert got == f"python -m pytest --hil-inventory /tmp/inv.yaml {named} -q"


def test_a_named_suite_runs_alone_on_a_given_inventory(repo: Path) -> None:
    assert pytest_call(repo, "suites/test_close.py", inventory="my.yaml") == (
        "python -m pytest --hil-inventory my.yaml suites/test_close.py"
    )
    assert pytest_call(repo, "--hil-inventory", "x.yaml") == (
        "python -m pytest suites --hil-inventory x.yaml"
    )
