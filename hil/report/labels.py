"""The Allure labels the report plugin gives a test (docs/reports.md).

At collection, from the test itself (:func:`labels_for`): ``parentSuite``,
``suite`` and ``nodeid``, ``subSuite`` for a parametrized test, ``pair``
(the reserved pair), and ``provider``, ``direction`` and ``pull_mode`` from
the test's parameters of those names (``mode`` counts as the pull mode).
Once the pair is set up, before the test (:func:`label_provider`,
:func:`label_module_params`): the provider the run found on both hosts and
each kernel module parameter it pinned, as read back.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hil.report import attach

if TYPE_CHECKING:
    import pytest

    from hil.report.observer import AllureObserver

PULL_MODE_PARAMS = ("pull_mode", "mode")


def _params(item: pytest.Item) -> dict[str, Any]:
    params: dict[str, Any] = getattr(getattr(item, "callspec", None), "params", {})
    return params


def labels_for(item: pytest.Item, pair: str | None) -> list[tuple[str, str]]:
    """The (label, value) pairs of a test: suite, pair, provider, direction, pull mode."""
    suite = re.sub(r"^test_", "", Path(str(item.path)).stem)
    # parentSuite too: allure-pytest's default (the package, "suites") would put every
    # suite under one node of the tree and of the overview's Suites widget.
    labels = [("parentSuite", suite), ("suite", suite), ("nodeid", item.nodeid)]
    params = _params(item)
    if params:  # one node per test function, its parameter variants below
        labels.append(("subSuite", getattr(item, "originalname", item.name)))
    if pair is not None:
        labels.append(("pair", pair))
    if params.get("provider"):
        labels.append(("provider", str(params["provider"])))
    if "direction" in params:
        labels.append(("direction", str(params["direction"])))
    mode = next((params[p] for p in PULL_MODE_PARAMS if p in params), None)
    if mode is not None:
        labels.append(("pull_mode", str(getattr(mode, "mode", mode))))
    return labels


def label_provider(item: pytest.Item, observer: AllureObserver | None) -> None:
    """The provider the run found on both hosts (or why none is known), unless the test
    names its own: never the inventory's claim."""
    if observer is None or "provider" in _params(item):
        return
    if observer.run is not None:
        attach.label("provider", observer.run.provider)
    else:
        attach.label("provider", "unknown: the pair was not set up before this test")


def label_module_params(request: pytest.FixtureRequest) -> None:
    """``module_param`` labels: each parameter the run pinned (``iw_cxgb4.mpa_rev=2``), as
    read back at setup (equal on both hosts, or the setup failed)."""
    pinned = request.getfixturevalue("hil_run").pinned
    for value in sorted({f"{k}={v}" for values in pinned.values() for k, v in values.items()}):
        attach.label("module_param", value)
