"""What a regression case saw of its scenario and of its bug's window, and what it missed.

A case cannot tell a fixed kernel from a broken one by itself: a
broken one shows as a kernel WARNING/KASAN report, a leaked cm_id or QP, an
event after destroy, a hang (the after-test checks and the contract), or a
crash (the liveness watch).  What a case CAN tell is whether its conditions
happened, in two kinds:

- ``reached_*`` metrics (:func:`note`): the scenario's setup happened (the
  listener held a request, the connects were refused...);
- ``window_*`` metrics (:func:`window`): the bug's own window, as its fix
  describes it, was hit (work still queued for an id at its destroy, a reject
  while its own upcall's work still ran...), measured by the kernel's own
  evidence where user space cannot see it (:mod:`.ktrace`).

:func:`missing` names what did not happen ("scenario not reached: ...",
"window not reached: ..."), and a test fails with it rather than pass on a run
that never came near the bug.  A window the kernel under test cannot show (no
event tracing: the production lab kernel) is recorded as not observable
(:data:`UNOBSERVABLE`); :func:`unobservable` names those, and the test is then
skipped, never passed.

Some bugs break no memory on the lab's kernel and so leave no report, yet the
kernel's trace shows the condition their fix rules out (an id freed by the wrong
code).  ``traced_*`` metrics (:func:`traced`) count those sightings, and
:func:`trace_findings` turns a nonzero count into a failure ("kernel trace: ...").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING

from hil.judge.timeline import Timeline

if TYPE_CHECKING:
    from hil.cm.recording import Recording

REACHED = "reached_"  # metric prefix: 1.0 when that condition of the scenario was seen, else 0.0
WINDOW = "window_"  # metric prefix: 1.0 when the bug's window was hit, 0.0 when not
UNOBSERVABLE = -1.0  # a window metric's value where the kernel cannot show the window
TRACED = "traced_"  # metric prefix: how often the trace showed what the fix rules out


def note(rec: Recording, condition: str, seen: bool) -> None:
    """Record whether ``condition`` (words joined by ``_``) of the scenario was seen."""
    rec.metric(f"{REACHED}{condition}", 1.0 if seen else 0.0)


def noted(
    tl: Timeline, conditions: Mapping[str, bool], windows: Mapping[str, bool | None]
) -> Timeline:
    """``tl`` with a ``reached_*`` metric for each of ``conditions`` and a ``window_*``
    metric for each of ``windows`` (None: not observable): for a case whose run made
    its own recording (a peer scenario's, a storm's, another sequence's)."""
    reached = {f"{REACHED}{name}": 1.0 if seen else 0.0 for name, seen in conditions.items()}
    hit = {f"{WINDOW}{name}": _window_value(seen) for name, seen in windows.items()}
    return replace(tl, metrics={**tl.metrics, **reached, **hit})


def _window_value(seen: bool | None) -> float:
    return UNOBSERVABLE if seen is None else 1.0 if seen else 0.0


def window(rec: Recording, name: str, seen: bool | None) -> None:
    """Record whether the bug's window ``name`` was hit; None: this kernel cannot show it."""
    rec.metric(f"{WINDOW}{name}", _window_value(seen))


def traced(rec: Recording, condition: str, count: int | None) -> None:
    """Record how often the kernel's trace showed ``condition``, which the bug's fix rules
    out; None: this kernel cannot show it."""
    rec.metric(f"{TRACED}{condition}", UNOBSERVABLE if count is None else float(count))


def trace_findings(tl: Timeline) -> str | None:
    """ "kernel trace: ..." naming each condition the trace showed (:func:`traced`), or None."""
    seen = {name: v for name, v in _conditions(tl, TRACED).items() if v > 0}
    if not seen:
        return None
    said = "; ".join(f"{name.replace('_', ' ')} ({v:g} times)" for name, v in sorted(seen.items()))
    return f"kernel trace ({tl.scenario}): {said}"


def _conditions(tl: Timeline, prefix: str) -> dict[str, float]:
    return {k[len(prefix) :]: v for k, v in tl.metrics.items() if k.startswith(prefix)}


def _words(names: list[str]) -> str:
    return ", ".join(n.replace("_", " ") for n in sorted(names))


def missing(tl: Timeline) -> str | None:
    """ "scenario not reached: ..." or "window not reached: ..." naming every condition
    the run did not see, or None.

    A timeline with no ``reached_*`` metric says nothing of its scenario, one with no
    ``window_*`` metric nothing of its bug's window: that is missing too (a case that
    forgot to say is not a pass).  A window not observable is not missing here
    (:func:`unobservable`)."""
    setup, windows = _conditions(tl, REACHED), _conditions(tl, WINDOW)
    if not setup:
        return f"scenario not reached: {tl.scenario} recorded no reached_* metric"
    absent = [name for name, v in setup.items() if v < 1.0]
    if absent:
        return f"scenario not reached ({tl.scenario}): {_words(absent)}"
    if not windows:
        return f"window not reached: {tl.scenario} measured no window (no window_* metric)"
    missed = [name for name, v in windows.items() if v == 0.0]
    if missed:
        return f"window not reached ({tl.scenario}): {_words(missed)}"
    return None


def unobservable(tl: Timeline) -> str | None:
    """ "window not observable ..." naming the windows this kernel could not show, or None."""
    blind = [
        name
        for prefix in (WINDOW, TRACED)
        for name, v in _conditions(tl, prefix).items()
        if v == UNOBSERVABLE
    ]
    if not blind:
        return None
    # Which kernel shows it is the case's own (docs/regressions.md, The windows): the
    # debug lab's tracepoints, or a widening's lines on its revert's kernels.
    return (
        f"window not observable on this kernel ({tl.scenario}): {_words(blind)}; its "
        "evidence is the kernel's own: tracepoints (the debug lab) or a widened kernel's "
        "lines (bench/reverts/widen/), docs/regressions.md"
    )
