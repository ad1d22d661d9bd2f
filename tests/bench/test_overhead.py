"""bench/test_overhead.py: its input checks and its pytest plugin's times (the lab run: docs)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench" / "test_overhead.py"


@pytest.mark.parametrize(
    "argv, says",
    [
        (["--inventory", "/nonexistent/inv.yaml"], "/nonexistent/inv.yaml: no such file"),
        (["--inventory", str(BENCH), "--rounds", "0"], "--rounds must be at least 1"),
    ],
)
def test_bad_input_is_a_message_and_exit_2(argv: list[str], says: str) -> None:
    out = subprocess.run(
        [sys.executable, str(BENCH), *argv], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 2 and says in out.stderr and "Traceback" not in out.stderr


def test_the_plugin_writes_each_tests_phases(
    pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(test_x="import time\n\ndef test_a():\n    time.sleep(0.05)\n")
    out = tmp_path / "times.jsonl"
    monkeypatch.setenv("HIL_OVERHEAD_OUT", str(out))
    bench = str(ROOT / "bench")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([bench, os.environ.get("PYTHONPATH", "")]))
    pytester.runpytest_subprocess("-p", "overhead_plugin", "-p", "no:cacheprovider")
    (line,) = [json.loads(x) for x in out.read_text().splitlines()]
    assert line["test"] == "test_x.py::test_a" and line["stages"] == {}
    assert line["call"] >= 0.05 and line["setup"] >= 0 and line["teardown"] >= 0
