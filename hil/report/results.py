"""allure-pytest's result files read back: each test's id, outcome, category, pair and provider.

The pipeline reads them after pytest to decide the exit status and to keep
each test's outcome per night (:mod:`hil.report.flaky`).  A test's id is
its pytest node id, which the report plugin puts in a ``nodeid`` label
(allure-pytest's own ``fullName`` drops a parametrized test's parameters).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hil.report.categories import category_in

NODEID_LABEL = "nodeid"
KNOWN_FLAKY_TAG = "known-flaky"  # an Allure tag the report plugin gives quarantined tests
# A label per known kernel finding the after-test checks told apart (hil.judge.known).
KNOWN_KERNEL_LABEL = "known_kernel_finding"
FAILING = ("failed", "broken")


@dataclass(frozen=True)
class Result:
    """One test's result in a run."""

    test: str  # the pytest node id (allure's fullName when the label is missing)
    status: str  # passed, failed, broken, skipped, unknown
    message: str
    category: str | None  # the Allure category of a failed or broken test
    pair: str | None
    provider: str | None
    known_flaky: bool
    start: int  # ms since the epoch
    known_kernel: tuple[str, ...] = ()  # the known kernel findings its hosts logged

    @property
    def failing(self) -> bool:
        return self.status in FAILING


def labels(data: dict[str, Any]) -> dict[str, list[str]]:
    """A result's labels by name (a label may repeat: tags)."""
    out: dict[str, list[str]] = {}
    for label in data.get("labels") or []:
        out.setdefault(str(label.get("name")), []).append(str(label.get("value")))
    return out


def _first(found: dict[str, list[str]], name: str) -> str | None:
    values = found.get(name)
    return values[0] if values else None


def read(results: Path) -> list[Result]:
    """Every test result in an Allure results directory; unreadable files are skipped
    (allure-pytest writes each file whole, a broken one is not a test's)."""
    cats_file = results / "categories.json"
    cats = json.loads(cats_file.read_text()) if cats_file.is_file() else []
    out = []
    for path in sorted(results.glob("*-result.json")):
        try:
            data = json.loads(path.read_text())
        except ValueError:
            continue
        out.append(_result(data, cats))
    return out


def _result(data: dict[str, Any], cats: list[dict[str, Any]]) -> Result:
    found = labels(data)
    status = str(data.get("status") or "unknown")
    message = str((data.get("statusDetails") or {}).get("message") or "")
    return Result(
        test=(found.get(NODEID_LABEL) or [str(data.get("fullName") or data.get("name"))])[0],
        status=status,
        message=message,
        category=category_in(cats, status, message) if status in FAILING else None,
        pair=_first(found, "pair"),
        provider=_first(found, "provider"),
        known_flaky=KNOWN_FLAKY_TAG in found.get("tag", []),
        start=int(data.get("start") or 0),
        known_kernel=tuple(found.get(KNOWN_KERNEL_LABEL, [])),
    )
