"""Small timeline queries the suites share, so each test states what it expects."""

from __future__ import annotations

from hil.cm.session import CMSession
from hil.cm.timeline import Event, Timeline


def seen(tl: Timeline, type_: str, side: str | None = None) -> list[Event]:
    """The events of ``type_`` (on ``side``, "a"/"b", when given) in time order."""
    return [e for e in tl.events if e.type == type_ and (side is None or e.side == side)]


def sides(cm: CMSession, role: str) -> str:
    """The side ("a"/"b") playing ``role`` ("active"/"passive") in the session."""
    return cm.active if role == "active" else cm.passive


def render(tl: Timeline) -> str:
    """The timeline's actions and events in time order, one a line (for messages)."""
    return "\n".join(f"  {item.brief()}" for item in tl.sorted().merged())


def explain(tl: Timeline, what: str) -> str:
    """A failure message: what was expected, then the whole timeline."""
    return f"{what}\nscenario {tl.scenario} on {tl.pair[0]} <-> {tl.pair[1]}:\n{render(tl)}"
