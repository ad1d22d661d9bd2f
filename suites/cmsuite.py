"""Small timeline queries the suites share, so each test states what it expects.

``explain`` and ``render`` (failure messages) and the ``Contract`` type of the
plugin's ``contract`` fixture are re-exported from hil for the suites.
"""

from __future__ import annotations

from hil.judge.timeline import Event, Timeline, explain, render
from hil.plugin.fixtures import Contract

__all__ = ["Contract", "explain", "render", "seen"]


def seen(tl: Timeline, type_: str, side: str | None = None) -> list[Event]:
    """The events of ``type_`` (on ``side``, "a"/"b", when given) in time order."""
    return [e for e in tl.events if e.type == type_ and (side is None or e.side == side)]
