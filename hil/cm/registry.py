"""The CM sequences by name: sequences register here; ``CMSession.run`` and ``hil cm list`` look.

A sequence is a function ``(session, **params) -> Timeline`` whose first
docstring line says what it does (``hil cm list`` shows it, with the
parameters and their defaults).  Register one with the decorator::

    from hil.cm.registry import sequence

    @sequence
    def my_race(s: CMSession, rounds: int = 3) -> Timeline:
        '''Race X against Y, ``rounds`` times.'''
        ...

The built-in ones (:mod:`hil.cm.sequences`) are registered once
:mod:`hil.cm.session` is imported; a lab's own register when their module is.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from hil.errors import InputError
from hil.judge.timeline import Timeline

Sequence = Callable[..., Timeline]
S = TypeVar("S", bound=Sequence)

SEQUENCES: dict[str, Sequence] = {}


def sequence(fn: S) -> S:
    """Register ``fn`` under its name; another function of that name is an error."""
    name = fn.__name__
    known = SEQUENCES.get(name)
    if known is not None and _origin(known) != _origin(fn):
        raise InputError(f"CM sequence {name!r} is registered already, by {_origin(known)}")
    SEQUENCES[name] = fn
    return fn


def lookup(name: str) -> Sequence:
    """The sequence registered as ``name``; InputError naming the known ones."""
    found = SEQUENCES.get(name)
    if found is None:
        raise InputError(f"no CM sequence {name!r} (known: {', '.join(sorted(SEQUENCES))})")
    return found


def _origin(fn: Sequence) -> str:
    return f"{fn.__module__}.{getattr(fn, '__qualname__', fn.__name__)}"
