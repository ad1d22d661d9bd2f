"""The timeout layers of a lab run: their names, their defaults, and how an expiry reads.

From the innermost out (docs/reliability.md, "Timeouts")::

    agent call  one call into a host's agent     --hil-timeout-agent, --timeout-agent
    step        one CM step's wait for an event  profile bound + --hil-timeout-step-slack
    test        one test's setup and call        --hil-timeout-test (pytest-timeout's)
    session     the tests of one pytest session  --hil-timeout-session
    nightly     the pytest run of ci/nightly     ci/nightly --timeout

Each layer's expiry says the same thing the same way (:func:`expired`)::

    timeout (step layer, 75 s: iw_cxgb4 close bound 65 s + slack 10 s) waiting for ...

The values in force are one process-wide :class:`Timeouts`: the entry points
(the pytest plugin, the CLI) set it from their options with :func:`configured`,
and the layers read it with :func:`active` when a caller gave no bound of its own.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Literal

Layer = Literal["agent call", "step", "test", "session", "nightly"]
LAYERS: tuple[Layer, ...] = ("agent call", "step", "test", "session", "nightly")
# What the nightly keeps for itself out of its bound: the session layer stops the
# tests this much earlier, so the pair is restored and the report written in time.
NIGHTLY_MARGIN_S = 600.0
# After the nightly's SIGTERM, how long the session may take to restore the pair
# before it is killed.
TERM_GRACE_S = 120.0


@dataclass(frozen=True)
class Timeouts:
    """The bound of each layer, in seconds; None: that layer does not bound the run.

    ``step_slack_s`` is not a step's whole bound: a step waits its pair's
    profile bound (hil.cm.steps.waits) plus this slack, so a late event is
    still recorded and judged rather than reported missing.
    """

    agent_call_s: float = 30.0
    step_slack_s: float = 10.0
    test_s: float | None = 600.0  # the project's pytest-timeout default (pyproject.toml)
    session_s: float | None = None  # a session is bounded by the nightly around it
    nightly_s: float | None = 8 * 3600.0

    def __post_init__(self) -> None:
        for name in ("agent_call_s", "step_slack_s", "test_s", "session_s", "nightly_s"):
            value = getattr(self, name)
            if value is not None and not value >= 0:
                raise ValueError(f"timeout {name} must be a number of seconds >= 0, not {value}")


DEFAULTS = Timeouts()
_active = DEFAULTS


def active() -> Timeouts:
    """The bounds in force in this process (:data:`DEFAULTS` unless an entry point set them)."""
    return _active


@contextmanager
def configured(**changes: float | None) -> Iterator[Timeouts]:
    """Set the given bounds (``agent_call_s=10``...; None values are left as they are)
    for the duration of the block; yields the bounds in force."""
    global _active
    previous = _active
    _active = replace(previous, **{k: v for k, v in changes.items() if v is not None})
    try:
        yield _active
    finally:
        _active = previous


def expired(layer: Layer, seconds: float, waiting_for: str, why: str = "") -> str:
    """How an expiry of ``layer`` reads: its bound, where the bound came from (``why``,
    optional) and what was waited for."""
    bound = f"{seconds:g} s: {why}" if why else f"{seconds:g} s"
    return f"timeout ({layer} layer, {bound}) waiting for {waiting_for}"


def session_bound(nightly_s: float) -> float:
    """The session layer's bound inside a nightly of ``nightly_s``: earlier by the
    nightly's margin (at most a quarter of it), so the session ends itself cleanly first."""
    return nightly_s - min(NIGHTLY_MARGIN_S, nightly_s / 4)


def seconds(text: str) -> float:
    """An argparse ``type`` (the CLI's and pytest's options): a number of seconds, 0 or more."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not 0 <= value < 1e9:
        raise argparse.ArgumentTypeError(f"seconds out of range: {text!r}")
    return value
