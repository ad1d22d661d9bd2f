"""pytest plugin of bench/test_overhead.py: each test's phase times, and its TestRun's stages.

Loaded with ``-p overhead_plugin`` (bench/ on PYTHONPATH); writes one JSON line
per test to ``$HIL_OVERHEAD_OUT``: ``{"test", "setup", "call", "teardown",
"stages"}`` (seconds; ``stages`` from the test's TestRun where the tree under
test has one, else ``{}``).
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

_PHASES: dict[str, dict[str, Any]] = {}
_STAGES: dict[str, dict[str, float]] = {}


def pytest_hil_observers(config: pytest.Config) -> list[Any]:
    """An observer of each test's stages, where the tree has TestRun (hil.run.observer)."""
    try:
        from hil.run.observer import Observer, TestResult
    except ImportError:  # a tree from before TestRun: phase times only
        return []

    class Stages(Observer):
        def test_finished(self, result: TestResult) -> None:
            _STAGES[result.name] = dict(result.stages)

    return [Stages()]


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    _PHASES.setdefault(report.nodeid, {"test": report.nodeid})[report.when] = report.duration
    if report.when == "teardown":
        line = {**_PHASES.pop(report.nodeid), "stages": _STAGES.pop(report.nodeid, {})}
        with open(os.environ["HIL_OVERHEAD_OUT"], "a") as f:
            f.write(json.dumps(line) + "\n")
