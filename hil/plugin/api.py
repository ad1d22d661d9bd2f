"""What a lab's own test directory imports from hil, next to the plugin's fixtures.

    from hil.plugin.api import Contract, explain, seen

    def test_close(cm, contract: Contract) -> None:
        tl = cm.run(sequences.close, by="active")
        assert seen(tl, "DISCONNECTED", "a"), explain(tl, "no DISCONNECTED on a")
        contract(tl)

``Contract`` is the type of the ``contract`` fixture (:mod:`hil.plugin.fixtures`);
``explain`` and ``render`` give failure messages with the timeline;
``seen`` picks events.  It imports only the judge, so importing it costs no
SSH, store or report module.
"""

from __future__ import annotations

from collections.abc import Callable

from hil.judge.contract import Verdict
from hil.judge.timeline import Event, Timeline, explain, render

__all__ = ["Contract", "explain", "render", "seen"]

# The ``contract`` fixture: judge a timeline, fail the test when a rule is broken.
Contract = Callable[[Timeline], Verdict]


def seen(tl: Timeline, type_: str, side: str | None = None) -> list[Event]:
    """The events of ``type_`` (on ``side``, "a"/"b", when given) in time order."""
    return [e for e in tl.events if e.type == type_ and (side is None or e.side == side)]
