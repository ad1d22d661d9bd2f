"""What a contract rule is, and the small timeline queries rules share.

A rule is a function ``(timeline, profiles) -> findings`` wrapped in a
:class:`Rule` that carries its name, the invariant it restates
(docs/contract.md), a one-line statement and its source.  ``profiles`` is
one profile or each host's own (:data:`~hil.judge.profiles.Profiles`): a
rule judges an event by :func:`reporter`'s profile (the host that reported
it) and a bound on an action by :func:`actor`'s (the host that acted).
"""

from __future__ import annotations

import errno
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from hil.judge.profiles import Profile, Profiles
from hil.judge.timeline import CONNECT_REPLIES, SIDES, Action, Event, Timeline

# Actions that end a connection on purpose.
CLOSE_ACTIONS = frozenset({"disconnect", "qp_err", "destroy", "kill"})


@dataclass(frozen=True)
class Finding:
    """What a rule saw: a message and the evidence for it."""

    message: str
    events: tuple[Event, ...] = ()
    actions: tuple[Action, ...] = ()


CheckFn = Callable[[Timeline, Profiles], Iterable[Finding]]


@dataclass(frozen=True)
class Rule:
    """One contract rule: ``check(timeline, profiles)`` yields its findings."""

    name: str
    invariant: int | None
    statement: str
    source: str
    check: CheckFn = field(repr=False, compare=False)


def rule(
    name: str, invariant: int | None, statement: str, source: str
) -> Callable[[CheckFn], Rule]:
    """Decorate a check function into a :class:`Rule`."""

    def wrap(fn: CheckFn) -> Rule:
        return Rule(name, invariant, statement, source, fn)

    return wrap


def host_of(tl: Timeline, side: str) -> str:
    """The host on ``side`` ("a"/"b") of the timeline's pair."""
    return tl.pair[SIDES.index(side)]


def actor(profiles: Profiles, tl: Timeline, action: Action) -> Profile:
    """The profile of the host that did ``action``: it bounds how long the action may take."""
    return profiles.of(host_of(tl, action.side))


def reporter(profiles: Profiles, event: Event) -> Profile:
    """The profile of the host that reported ``event``: it says which statuses it may carry."""
    return profiles.of(event.host)


def errno_name(result: str | int) -> str:
    """``"ECONNREFUSED"`` for ``"ECONNREFUSED"``, 111 or -111; ``"ok"`` stays."""
    if isinstance(result, int):
        return errno.errorcode.get(abs(result), str(result))
    return result


def replies(tl: Timeline, cm_id: str | None) -> list[Event]:
    """The connect replies (ESTABLISHED, REJECTED, ...) of a cm_id in delivery order."""
    return [e for e in tl.events_for(cm_id) if e.type in CONNECT_REPLIES]


def ms(us: float) -> str:
    """Microseconds as a readable millisecond figure."""
    return f"{us / 1000:.1f} ms"
