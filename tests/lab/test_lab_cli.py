"""``hil lab`` on the command line: bad input is one line and exit 1."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest


def hil(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hil", "lab", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize(
    "args, message",
    [
        (["up", "--hosts", "1"], "--hosts must be between 2 and"),
        (["up", "--dir", "/tmp/a b"], "use only letters"),
        (["up", "--accel", "xen"], "invalid choice: 'xen'"),
    ],
)
def test_bad_input_is_one_line_and_exit_1(args: list[str], message: str) -> None:
    out = hil(*args)
    assert out.returncode == 1
    assert message in out.stderr
    assert "Traceback" not in out.stderr


def test_status_and_inventory_of_no_lab(tmp_path: Path) -> None:
    out = hil("status", "--dir", str(tmp_path / "none"))
    assert (out.returncode, out.stdout.strip()) == (3, f"no lab in {tmp_path / 'none'}")
    out = hil("inventory", "--dir", str(tmp_path / "none"))
    assert out.returncode == 3
    assert f"start one with `hil lab up --dir {tmp_path / 'none'}`" in out.stderr
    out = hil("down", "--dir", str(tmp_path / "none"))
    assert out.returncode == 0
