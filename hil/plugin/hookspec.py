"""Hooks the hil plugin adds to pytest (registered in ``pytest_addhooks``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from hil.cm.observer import Observer


@pytest.hookspec
def pytest_hil_observers(config: pytest.Config) -> list[Observer]:
    """Observers to register on the session's pair run (every implementation's are used).

    The Allure report returns its own here; a lab adds a live dashboard or a
    capture the same way, from a conftest.py or a plugin.
    """
    return []


@pytest.hookspec
def pytest_hil_reserved(config: pytest.Config, pair: str) -> None:
    """The session (or xdist worker) holds ``pair`` now; called once, after the reservation."""
