"""What a regression case saw of its scenario, and what it missed.

A case cannot tell a fixed kernel from a broken one by itself: a
broken one shows as a kernel WARNING/KASAN report, a leaked cm_id or QP, an
event after destroy, a hang (the after-test checks and the contract), or a
crash (the liveness watch).  What a case CAN tell is whether its conditions
happened, so every case also says that: :func:`missing` reads the timeline's
``reached_*`` metrics and names what did not happen ("scenario not
reached: ..."), and a test fails with it rather than pass on a run that
never came near the bug.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hil.judge.timeline import Timeline

if TYPE_CHECKING:
    from hil.cm.recording import Recording

REACHED = "reached_"  # metric prefix: 1.0 when that condition of the scenario was seen, else 0.0


def note(rec: Recording, condition: str, seen: bool) -> None:
    """Record whether ``condition`` (words joined by ``_``) of the scenario was seen."""
    rec.metric(f"{REACHED}{condition}", 1.0 if seen else 0.0)


def missing(tl: Timeline) -> str | None:
    """ "scenario not reached: ..." naming every condition the run did not see, or None.

    A timeline with no ``reached_*`` metric at all says nothing of its scenario, and
    that is missing too (a case that forgot to say is not a pass)."""
    conditions = {k[len(REACHED) :]: v for k, v in tl.metrics.items() if k.startswith(REACHED)}
    if not conditions:
        return f"scenario not reached: {tl.scenario} recorded no reached_* metric"
    absent = sorted(name for name, v in conditions.items() if v < 1.0)
    if not absent:
        return None
    return f"scenario not reached ({tl.scenario}): " + ", ".join(
        n.replace("_", " ") for n in absent
    )
