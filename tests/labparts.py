"""The parts ``--lab-tests`` selects (tests/conftest.py): ci/tests runs ``none``,
``steady`` and ``restarts`` side by side, each lab part on a lab of its own."""

from __future__ import annotations

from collections.abc import Callable

import pytest


def _marked(item: pytest.Item, marker: str) -> bool:
    return item.get_closest_marker(marker) is not None


# Which tests each part runs.  The guest-restarting tests are a part of
# their own so that ci/tests can give them a lab of their own, beside the lab of the
# others: the two halves' waits (guest boots, liveness bounds) then overlap.
LAB_PARTS: dict[str, Callable[[pytest.Item], bool]] = {
    "all": lambda i: True,
    "only": lambda i: _marked(i, "lab"),
    "none": lambda i: not _marked(i, "lab"),
    "steady": lambda i: _marked(i, "lab") and not _marked(i, "restarts_guests"),
    "restarts": lambda i: _marked(i, "lab") and _marked(i, "restarts_guests"),
}
