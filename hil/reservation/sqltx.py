"""The transaction the SQL stores hand to their queries: a clock and a query runner."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol


class Tx(Protocol):
    """One open transaction: the store's clock and a query runner."""

    now: float

    def q(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Run ``sql`` (``?`` placeholders) and return its rows (none for writes)."""
