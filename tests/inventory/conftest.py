"""Helpers for the inventory tests: run the real ``hil`` console script."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "inventory" / "example-lab.yaml"


def _hil_script() -> str:
    # The console script installed next to the interpreter running the tests
    # (.venv/bin/hil), so the entry point itself is exercised.
    script = Path(sys.executable).parent / "hil"
    if not script.exists():
        pytest.fail(f"no hil console script at {script}: run ci/install (pip install -e .)")
    return str(script)


@pytest.fixture
def hil() -> Callable[..., subprocess.CompletedProcess[str]]:
    """Run ``hil ARGS...`` (cwd optional) and return the completed process."""

    def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in os.environ.items() if k != "HIL_INVENTORY"}
        return subprocess.run(
            [_hil_script(), *args],
            cwd=cwd or REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    return run
