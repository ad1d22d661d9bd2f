"""Small timeline queries the suites share, so each test states what it expects.

Also the ``Contract`` type of the ``contract`` fixture (suites/conftest.py).
"""

from __future__ import annotations

from collections.abc import Callable

from hil.cm.contract import Verdict
from hil.cm.timeline import Event, Timeline

# ``contract(timeline)``: the verdict, or the test fails showing it.
Contract = Callable[[Timeline], Verdict]


def seen(tl: Timeline, type_: str, side: str | None = None) -> list[Event]:
    """The events of ``type_`` (on ``side``, "a"/"b", when given) in time order."""
    return [e for e in tl.events if e.type == type_ and (side is None or e.side == side)]


def render(tl: Timeline) -> str:
    """The timeline's actions and events in time order, one a line (for messages)."""
    return "\n".join(f"  {item.brief()}" for item in tl.sorted().merged())


def explain(tl: Timeline, what: str) -> str:
    """A failure message: what was expected, then the whole timeline."""
    return f"{what}\nscenario {tl.scenario} on {tl.pair[0]} <-> {tl.pair[1]}:\n{render(tl)}"
